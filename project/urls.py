from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("retrieval.api.urls")),
    # The search page requires a signed-in user (RETRIEVAL["SEARCH_PAGE_PUBLIC"] is False).
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("retrieval.urls")),
]
