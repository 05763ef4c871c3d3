"""URLs the app provides; a site includes them under any prefix."""

from django.urls import path

from . import views

app_name = "retrieval"

urlpatterns = [
    path("", views.SearchView.as_view(), name="search"),
    path("documents/<int:pk>/", views.DocumentView.as_view(), name="document"),
    # Sign-in for sites whose LOGIN_URL answers nothing (see views.login_url).
    path("login/", views.LoginView.as_view(), name="login"),
]
