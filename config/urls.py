from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    # Browsers ask for /favicon.ico on pages that name no icon (the API's JSON, a raw export).
    return HttpResponseRedirect(static("sessiontree/favicon.svg"))


urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("api/", include("sessiontree.api.urls")),
    path("api/", include("roleplay.api.urls")),
]

# Under /api/ Django's own error pages answer in the API's JSON error shape.
handler400 = "sessiontree.api.errors.bad_request"
handler403 = "sessiontree.api.errors.permission_denied"
handler404 = "sessiontree.api.errors.page_not_found"
handler500 = "sessiontree.api.errors.server_error"
