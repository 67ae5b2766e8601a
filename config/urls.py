from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/", include("sessiontree.api.urls")),
    path("api/", include("roleplay.api.urls")),
]

# Under /api/ Django's own error pages answer in the API's JSON error shape.
handler400 = "sessiontree.api.errors.bad_request"
handler403 = "sessiontree.api.errors.permission_denied"
handler404 = "sessiontree.api.errors.page_not_found"
handler500 = "sessiontree.api.errors.server_error"
