"""The sign-in the original's UI does before it calls the API: `POST /sandbox/spacecat/auth/login
{"accessToken": <IMS user token>}` -> `{"sessionToken": <ES256 JWT>}` for the same user and organizations
(the IMS simulator vouches for the access token)."""

import json

import jwt
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from sandbox.ims import keys
from sandbox.ims.sessions import issue_session_token


@csrf_exempt
@require_POST
def login(request):
    try:
        body = json.loads(request.body or b"{}")
        claims = keys.verify_token(body["accessToken"]) if isinstance(body, dict) else None
    except (ValueError, KeyError, TypeError, jwt.PyJWTError):
        claims = None
    if not claims or claims.get("type") != keys.ACCESS_TOKEN or not claims.get("user_id"):
        return JsonResponse({"error": "invalid access token"}, status=401)
    token = issue_session_token(user_id=claims["user_id"], org_ids=list(claims.get("org_ids") or []))
    return JsonResponse({"sessionToken": token}, headers={"Cache-Control": "no-store"})
