"""Writes of the Semrush simulator: workspaces, projects, tags, prompts and publish, with Semrush's rules.

Each raises a `SimError` subclass that the API turns into its JSON error; duplicates are decided by the
database's unique constraints, so of two concurrent creates exactly one wins and the other learns the
winner's id.
"""

import re
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from sandbox.semrush.models import IdempotentResponse, Project, Prompt, TagRoot, TagValue, Workspace

MAX_PROMPTS_PER_WRITE = 100


class SimError(Exception):
    status = 400
    code = "invalid_request"

    def __init__(self, message: str, **extra):
        super().__init__(message)
        self.message = message
        self.extra = extra


class Invalid(SimError):
    status, code = 400, "invalid_request"


class NotFound(SimError):
    status, code = 404, "not_found"


class Duplicate(SimError):
    status, code = 409, "duplicate"


def workspace_touch(workspace_id: str) -> Workspace:
    """The workspace, recorded on first use: the simulator accepts any workspace id it is given."""
    workspace, _ = Workspace.objects.get_or_create(id=workspace_id)
    return workspace


def workspace_create(*, name: object, parent_id: object, workspace_id: str | None = None) -> Workspace:
    if not isinstance(name, str) or not name.strip():
        raise Invalid("`name` must be a non-empty string")
    if not isinstance(parent_id, str) or not parent_id.strip():
        raise Invalid("`parentId` must be a non-empty string")
    workspace_touch(parent_id)
    fields = {"name": name, "parent_id": parent_id}
    if workspace_id:
        workspace, _ = Workspace.objects.update_or_create(id=workspace_id, defaults=fields)
        return workspace
    return Workspace.objects.create(**fields)


def project_create(*, workspace_id: str, name, geo_target_id, language_code) -> Project:
    """Create the AI project of a (geo target, language) slice. Raises Duplicate naming the existing id."""
    if not isinstance(name, str) or not name.strip():
        raise Invalid("`name` must be a non-empty string")
    if isinstance(geo_target_id, bool) or not isinstance(geo_target_id, int) or not 2000 <= geo_target_id < 3000:
        raise Invalid("`geoTargetId` must be a country criterion id (2000 + ISO 3166-1 numeric)")
    if not isinstance(language_code, str) or not re.fullmatch(r"[A-Za-z]{2,3}(-[A-Za-z]{2,4})?", language_code):
        raise Invalid("`languageCode` must be a BCP-47 language tag, e.g. fr or de-ch")
    workspace = workspace_touch(workspace_id)
    try:
        with transaction.atomic():
            return Project.objects.create(
                workspace=workspace, name=name, geo_target_id=geo_target_id, language_code=language_code.lower()
            )
    except IntegrityError:
        existing = Project.objects.get(
            workspace=workspace, geo_target_id=geo_target_id, language_code=language_code.lower()
        )
        raise Duplicate("a project for this geo target and language exists", existingId=existing.id) from None


def project_delete(*, workspace_id: str, project_id: str) -> None:
    """Delete the workspace's project with its prompts, for good: a later call naming it answers 404 (ids are never
    reused), and so does a repeated write that carried an Idempotency-Key (its stored answer goes with the
    project). Raises NotFound for a project the workspace does not have."""
    with transaction.atomic():
        deleted, _ = Project.objects.filter(id=project_id, workspace_id=workspace_id).delete()
        if not deleted:
            raise NotFound("no such project in this workspace")
        IdempotentResponse.objects.filter(path__contains=f"/ai-projects/{project_id}/").delete()


def project_get(project_id: str) -> Project:
    project = Project.objects.filter(id=project_id).first()
    if project is None:
        raise NotFound("no such project")
    return project


def tag_root_create(*, workspace_id: str, name, values=None) -> TagRoot:
    """Create a tag with its first values in one step (all or nothing). Raises Duplicate for a name the
    workspace has, naming the existing tag."""
    if not isinstance(name, str) or not name.strip():
        raise Invalid("`name` must be a non-empty string")
    values = [] if values is None else values
    if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
        raise Invalid("`values` must be a list of non-empty strings")
    workspace = workspace_touch(workspace_id)
    try:
        with transaction.atomic():
            root = TagRoot.objects.create(workspace=workspace, name=name)
            TagValue.objects.bulk_create([TagValue(root=root, value=v) for v in dict.fromkeys(values)])
            return root
    except IntegrityError:
        existing = TagRoot.objects.get(workspace=workspace, name=name)
        raise Duplicate("a tag with this name exists", existingId=existing.id) from None


def tag_value_create(*, workspace_id: str, root_id: str, value) -> TagValue:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("`value` must be a non-empty string")
    root = TagRoot.objects.filter(id=root_id, workspace_id=workspace_id).first()
    if root is None:
        raise NotFound("no such tag in this workspace")
    try:
        with transaction.atomic():
            return TagValue.objects.create(root=root, value=value)
    except IntegrityError:
        existing = TagValue.objects.get(root=root, value=value)
        raise Duplicate("this tag value exists", existingId=existing.id) from None


def _timestamp(value, field: str) -> str:
    if not isinstance(value, str):
        raise Invalid(f"`{field}` must be an ISO 8601 date-time string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(f"`{field}` must be an ISO 8601 date-time string") from None
    if parsed.tzinfo is None:
        raise Invalid(f"`{field}` must carry a time zone")
    return value


def prompts_write(*, project_id: str, prompts) -> list[Prompt]:
    """Record a batch of prompts exactly as sent. Every prompt needs a non-empty `text`, `tagIds` naming
    tag values of the project's workspace, and created/updated by/at metadata. A published project goes
    back to draft: it now has unpublished changes."""
    project = project_get(project_id)
    if not isinstance(prompts, list) or not prompts:
        raise Invalid("`prompts` must be a non-empty list")
    if len(prompts) > MAX_PROMPTS_PER_WRITE:
        raise Invalid(f"at most {MAX_PROMPTS_PER_WRITE} prompts per write", limit=MAX_PROMPTS_PER_WRITE)
    known = set(TagValue.objects.filter(root__workspace_id=project.workspace_id).values_list("id", flat=True))
    rows = []
    for index, prompt in enumerate(prompts):
        where = f"prompts[{index}]"
        if not isinstance(prompt, dict):
            raise Invalid(f"{where} must be an object")
        text, tag_ids = prompt.get("text"), prompt.get("tagIds")
        if not isinstance(text, str) or not text.strip():
            raise Invalid(f"{where}.text must be a non-empty string")
        if not isinstance(tag_ids, list) or not all(isinstance(t, str) for t in tag_ids):
            raise Invalid(f"{where}.tagIds must be a list of tag ids")
        unknown = [t for t in tag_ids if t not in known]
        if unknown:
            raise Invalid(f"{where}.tagIds names tags this workspace does not have", unknownTagIds=unknown)
        for field in ("createdBy", "updatedBy"):
            if not isinstance(prompt.get(field), str) or not prompt[field].strip():
                raise Invalid(f"{where}.{field} must be a non-empty string")
        rows.append(
            Prompt(
                project=project,
                text=text,
                tag_ids=tag_ids,
                created_by=prompt["createdBy"],
                created_at=_timestamp(prompt.get("createdAt"), f"{where}.createdAt"),
                updated_by=prompt["updatedBy"],
                updated_at=_timestamp(prompt.get("updatedAt"), f"{where}.updatedAt"),
            )
        )
    with transaction.atomic():
        created = Prompt.objects.bulk_create(rows)
        Project.objects.filter(id=project.id).update(status=Project.Status.DRAFT)
    return created


def project_publish(*, project_id: str) -> Project:
    project = project_get(project_id)
    Project.objects.filter(id=project.id).update(status=Project.Status.PUBLISHED, published_at=timezone.now())
    project.refresh_from_db()
    return project
