"""Routes of the local Semrush simulator, mounted at /sandbox/semrush/ (the API itself lives under v1/).

Path parameters carry a `semrush` prefix so serenity/routes.py can classify them apart from the product's
own ids: they name records of the simulated Semrush, never a tenant record of ours.
"""

from django.urls import path

from sandbox.semrush import views

app_name = "sandbox_semrush"

urlpatterns = [
    path("v1/languages", views.languages, name="languages"),
    path("v1/ai_models", views.ai_models, name="ai-models"),
    path("v1/workspaces", views.workspaces, name="workspaces"),
    path("v1/workspaces/<str:semrushWorkspaceId>/brand-topics", views.brand_topics, name="brand-topics"),
    path("v1/workspaces/<str:semrushWorkspaceId>/ai-projects", views.projects, name="projects"),
    path(
        "v1/workspaces/<str:semrushWorkspaceId>/ai-projects/<str:semrushProjectId>",
        views.workspace_project,
        name="workspace-project",
    ),
    path("v1/workspaces/<str:semrushWorkspaceId>/tags", views.tags, name="tags"),
    path("v1/workspaces/<str:semrushWorkspaceId>/tags/<str:semrushTagId>/values", views.tag_values, name="tag-values"),
    path("v1/ai-projects/<str:semrushProjectId>", views.project, name="project"),
    path("v1/ai-projects/<str:semrushProjectId>/prompts", views.prompts, name="prompts"),
    path("v1/ai-projects/<str:semrushProjectId>/publish", views.publish, name="publish"),
    path("_state", views.state_view, name="state"),
    path("_control", views.control, name="control"),
]
