import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from sessiontree.api.wsgi import WholeRequestBody

# A chunked request body is read whole before Django sees it (sessiontree/api/wsgi.py).
application = WholeRequestBody(get_wsgi_application())
