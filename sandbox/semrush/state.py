"""Reads of the Semrush simulator's state, in the API's JSON shapes, for tests and `GET /_state`."""

from sandbox.semrush import controls
from sandbox.semrush.models import Call, FailureRule, Project, Prompt, TagRoot, Workspace


def _iso(value):
    return value.isoformat() if value else None


def workspace_json(workspace: Workspace) -> dict:
    return {
        "id": workspace.id,
        "name": workspace.name,
        "parentId": workspace.parent_id,
        "createdAt": _iso(workspace.created_at),
    }


def project_json(project: Project) -> dict:
    return {
        "id": project.id,
        "workspaceId": project.workspace_id,
        "name": project.name,
        "geoTargetId": project.geo_target_id,
        "languageCode": project.language_code,
        "status": project.status,
        "published": project.status == Project.Status.PUBLISHED,
        "publishedAt": _iso(project.published_at),
        "createdAt": _iso(project.created_at),
    }


def tag_root_json(root: TagRoot) -> dict:
    return {
        "id": root.id,
        "name": root.name,
        "values": [{"id": v.id, "value": v.value} for v in sorted(root.values.all(), key=lambda v: v.value)],
    }


def prompt_json(prompt: Prompt) -> dict:
    return {
        "id": prompt.prompt_id,
        "text": prompt.text,
        "tagIds": list(prompt.tag_ids),
        "createdBy": prompt.created_by,
        "createdAt": prompt.created_at,
        "updatedBy": prompt.updated_by,
        "updatedAt": prompt.updated_at,
    }


def workspaces(parent_id: str | None = None) -> list[dict]:
    rows = Workspace.objects.order_by("created_at", "id")
    if parent_id is not None:
        rows = rows.filter(parent_id=parent_id)
    return [workspace_json(w) for w in rows]


def projects(workspace_id: str | None = None) -> list[dict]:
    rows = Project.objects.order_by("created_at", "id")
    if workspace_id is not None:
        rows = rows.filter(workspace_id=workspace_id)
    return [project_json(p) for p in rows]


def project(project_id: str) -> dict | None:
    found = Project.objects.filter(id=project_id).first()
    return project_json(found) if found else None


def tags(workspace_id: str) -> list[dict]:
    roots = TagRoot.objects.filter(workspace_id=workspace_id).prefetch_related("values").order_by("name")
    return [tag_root_json(r) for r in roots]


def tag_values(workspace_id: str) -> dict[str, dict[str, str]]:
    """{root name: {value: tag id}} of the workspace."""
    return {root["name"]: {v["value"]: v["id"] for v in root["values"]} for root in tags(workspace_id)}


def prompts(project_id: str) -> list[dict]:
    """The project's prompts exactly as recorded, in write order."""
    return [prompt_json(p) for p in Prompt.objects.filter(project_id=project_id).order_by("seq")]


def calls(*, path_contains: str | None = None, method: str | None = None, after: int | None = None) -> list[dict]:
    """The API calls answered so far, oldest first: [{method, path, query, status, userId}]; with `after` (a
    `last_call_seq()`), only those answered since."""
    rows = Call.objects.order_by("seq")
    if after is not None:
        rows = rows.filter(seq__gt=after)
    if path_contains:
        rows = rows.filter(path__contains=path_contains)
    if method:
        rows = rows.filter(method=method.upper())
    return [
        {"method": c.method, "path": c.path, "query": c.query, "status": c.status, "userId": c.user_id} for c in rows
    ]


def last_call_seq() -> int:
    """The place of the last call answered so far in the call log (0 when none): what `calls(after=...)` counts
    from, e.g. to prove that nothing was written after a given moment."""
    return Call.objects.order_by("-seq").values_list("seq", flat=True).first() or 0


def snapshot(workspace_id: str | None = None) -> dict:
    """Everything worth inspecting, optionally for one workspace (and its projects)."""
    workspace_rows = Workspace.objects.order_by("created_at", "id")
    if workspace_id is not None:
        workspace_rows = workspace_rows.filter(id=workspace_id)
    project_list = projects(workspace_id)
    return {
        "workspaces": [workspace_json(w) for w in workspace_rows],
        "projects": [{**p, "prompts": prompts(p["id"])} for p in project_list],
        "tags": {w.id: tags(w.id) for w in workspace_rows if w.tag_roots.exists()},
        "switches": {
            "latencyMs": controls.latency_ms(),
            "rateLimit": controls.rate_limit(),
            "failures": [
                {
                    "status": r.status,
                    "remaining": r.remaining,
                    "path": r.path_contains or None,
                    "method": r.method or None,
                    "retryAfter": r.retry_after,
                }
                for r in FailureRule.objects.filter(remaining__gt=0).order_by("id")
            ],
        },
    }
