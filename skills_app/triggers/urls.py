from __future__ import annotations

from django.urls import path

from skills_app.triggers import views

urlpatterns = [
    path("", views.triggers_home, name="triggers-home"),
    path("collisions/", views.collisions_page, name="triggers-collisions"),
    path("packages/<int:pk>/", views.package_page, name="triggers-package"),
    path("packages/<int:pk>/queries/add/", views.query_add, name="triggers-query-add"),
    path(
        "packages/<int:pk>/queries/<int:query_id>/edit/",
        views.query_edit,
        name="triggers-query-edit",
    ),
    path(
        "packages/<int:pk>/queries/<int:query_id>/remove/",
        views.query_remove,
        name="triggers-query-remove",
    ),
    path("packages/<int:pk>/import/", views.set_import, name="triggers-import"),
    path("packages/<int:pk>/export.json", views.set_export, name="triggers-export"),
    path("packages/<int:pk>/plan/", views.run_plan, name="triggers-plan"),
    path("packages/<int:pk>/gate/", views.gate_setting, name="triggers-gate"),
    path("packages/<int:pk>/runs/", views.run_start, name="triggers-start"),
    path("runs/<int:pk>/", views.run_report, name="triggers-run"),
    path("runs/<int:pk>/stop/", views.run_stop, name="triggers-stop"),
    path("runs/<int:pk>/results.json", views.run_results_json, name="triggers-results-json"),
]
