"""Production settings: `check --deploy` passes with a correct configuration, refuses to start without the values
that have no safe default, and every variable read is documented in docker/.env.example."""

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ROOT = Path(__file__).resolve().parents[2]


def session_public_key_b64() -> str:
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    return base64.b64encode(
        key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    ).decode()


def production_env(**overrides) -> dict:
    """A complete production-like environment, built from nothing so the suite's own variables never leak in."""
    pair = {
        f"IMS_{name}_{field}": f"serenity-{name.lower()}-{field.lower().replace('_', '-')}"
        for name in ("DEFAULT", "SEMRUSH")
        for field in (
            "EMITTER_CLIENT_ID",
            "EMITTER_CLIENT_SECRET",
            "EMITTER_DEFINITION_ID",
            "CONSUMER_CLIENT_ID",
            "CONSUMER_CLIENT_SECRET",
        )
    }
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "serenity.settings",
        "SERENITY_ENVIRONMENT": "production",
        "DEBUG": "false",
        "SECRET_KEY": "p" + Fernet.generate_key().decode() + "-production-signing-key",
        "DATABASE_URL": "postgres://serenity:secret@db.internal:5432/serenity",
        "PROMISE_TOKEN_KEYS": f"{Fernet.generate_key().decode()},{Fernet.generate_key().decode()}",
        "ALLOWED_HOSTS": "serenity.example.com",
        "IMS_HOST": "https://ims.example.com",
        "IMS_JWKS_URL": "https://ims.example.com/ims/keys",
        "IMS_ISSUER": "https://ims.example.com",
        "IMS_AUDIENCE": "serenity-ui",
        "SEMRUSH_API_BASE": "https://api.semrush.example.com",
        "DRS_PROMPT_GENERATION_FUNCTION": "arn:aws:lambda:us-east-1:123456789012:function:drs-prompt-generation",
        "AWS_REGION": "us-east-1",
        "AWS_ACCOUNT_ID": "123456789012",
        "SESSION_TOKEN_PUBLIC_KEY_B64": session_public_key_b64(),
        "SESSION_TOKEN_AUDIENCE": "serenity-api",
        **pair,
    }
    env.update(overrides)
    return env


def manage(env: dict, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_check_deploy_passes_with_production_values_without_a_security_warning():
    result = manage(production_env(), "check", "--deploy")

    assert result.returncode == 0, result.stderr
    # Deployment checks are Django's `security.*` and ours (`serenity.*`); other apps' warnings (e.g. the
    # OpenAPI generator's) are not about the production configuration.
    flagged = [
        line for line in (result.stdout + result.stderr).splitlines() if "(security." in line or "(serenity." in line
    ]
    assert flagged == []


@pytest.mark.parametrize(
    "name",
    ["SECRET_KEY", "DATABASE_URL", "PROMISE_TOKEN_KEYS", "SESSION_TOKEN_PUBLIC_KEY_B64", "SESSION_TOKEN_AUDIENCE"],
)
def test_production_refuses_to_start_without_a_value_that_has_no_safe_default(name):
    # Empty rather than absent: an empty value counts as missing, and a developer's .env cannot fill it in.
    result = manage(production_env(**{name: ""}), "check", "--deploy")

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: "
        f"{name} must be set when SERENITY_ENVIRONMENT='production' (see docker/.env.example)."
    )


def test_production_with_session_tokens_off_needs_no_session_key():
    result = manage(
        production_env(SESSION_TOKENS_ENABLED="false", SESSION_TOKEN_PUBLIC_KEY_B64="", SESSION_TOKEN_AUDIENCE=""),
        "check",
        "--deploy",
    )

    assert result.returncode == 0, result.stderr


def test_a_session_key_that_is_not_a_p256_public_key_fails_the_checks():
    rsa_pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )

    for bad in ("not base64!", base64.b64encode(b"not a pem").decode(), base64.b64encode(rsa_pem).decode()):
        result = manage(production_env(SESSION_TOKEN_PUBLIC_KEY_B64=bad), "check", "--deploy")
        assert result.returncode == 1 and "serenity.E005" in result.stderr, result.stderr


def variables_read() -> set[str]:
    """Names read by the settings package, by the entry points (manage.py, WSGI, Celery, gunicorn's
    configuration) and by the image's entrypoint (docker/serenity-entrypoint)."""
    settings_source = "\n".join(f.read_text() for f in sorted((ROOT / "serenity" / "settings").glob("*.py")))
    names = set(re.findall(r"\benv\.\w+\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']", settings_source))
    names |= set(re.findall(r"\brequired\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']", settings_source))
    prefixes = re.findall(r"\b_pair\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']\)", settings_source)
    suffixes = re.findall(r"f[\"']\{prefix\}_([A-Z][A-Z0-9_]+)[\"']", settings_source)
    names |= {f"{prefix}_{suffix}" for prefix in prefixes for suffix in suffixes}
    entrypoint = (ROOT / "docker" / "serenity-entrypoint").read_text()
    names |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]+):-", entrypoint))
    for entry_point in (
        ROOT / "manage.py",
        ROOT / "serenity" / "wsgi.py",
        ROOT / "serenity" / "celery.py",
        ROOT / "serenity" / "gunicorn.py",
    ):
        source = entry_point.read_text()
        names |= set(re.findall(r"os\.environ\.setdefault\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']", source))
        names |= set(re.findall(r"os\.environ\.get\(\s*[\"']([A-Z][A-Z0-9_]+)[\"']", source))
    return names


def test_env_example_documents_exactly_the_variables_that_are_read():
    documented = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (ROOT / "docker" / ".env.example").read_text(), re.M))
    read = variables_read()

    assert {"undocumented": sorted(read - documented), "not read": sorted(documented - read)} == {
        "undocumented": [],
        "not read": [],
    }


def test_a_secret_can_be_read_from_a_file(tmp_path):
    """STYLE §7: every variable also accepts NAME_FILE, the way container secrets are mounted."""
    import os
    import subprocess
    import sys

    from cryptography.fernet import Fernet

    secret = tmp_path / "secret_key"
    secret.write_text("s" * 60)
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY",)}
    env.update(
        {
            "SERENITY_ENVIRONMENT": "local",
            "SECRET_KEY_FILE": str(secret),
            "PROMISE_TOKEN_KEYS": Fernet.generate_key().decode(),
            "DJANGO_SETTINGS_MODULE": "serenity.settings",
        }
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; "
            "print(len(settings.SECRET_KEY), settings.SECRET_KEY == 's' * 60)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout.split() == ["60", "True"], result.stderr
