"""URLs the app provides; a site includes them under any prefix."""

from django.urls import path

from . import views

app_name = "retrieval"

urlpatterns = [
    path("", views.SearchView.as_view(), name="search"),
]
