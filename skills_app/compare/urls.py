from __future__ import annotations

from django.urls import path

from skills_app.compare import views as compare_views

urlpatterns = [
    path("", compare_views.compare_home, name="compare"),
    path("start/", compare_views.compare_start, name="compare-start"),
    path("<int:pk>/", compare_views.compare_detail, name="compare-detail"),
]
