"""Single sign-on's settings and mapping rules: how ``SWITCHYARD_OIDC_*``
becomes a configuration (or a refusal to start), and which organisations and
roles an identity's e-mail domain and groups grant."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from accounts.models import Membership
from accounts.oidc_rules import ROLES, Rule, claim_values, grants_for, rules_parse
from config.settings_sso import PASSWORD_BACKEND, SSO_BACKEND, sign_in_backends, sso_config
from tests.conftest import ROOT


def _read(monkeypatch, **variables: str):
    for name in list(os.environ):
        if name.startswith("SWITCHYARD_OIDC_"):
            monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return sso_config()


def test_roles_are_the_membership_roles_lowest_first():
    assert set(ROLES) == set(Membership.Role.values)
    assert ROLES[0] == "viewer" and ROLES[-1] == "owner"


def test_rules_parse_entries_with_spaces_and_case():
    rules = rules_parse(
        " Acme.COM=acme:Developer , corp.example=corp:admin,,", variable="V", lowercase_keys=True
    )
    assert rules == (Rule("acme.com", "acme", "developer"), Rule("corp.example", "corp", "admin"))
    assert rules_parse("", variable="V") == ()


def test_group_names_keep_their_case_and_may_hold_colons_and_equals():
    rules = rules_parse("/Acme/Admins=acme:admin,team:a=b=globex:viewer", variable="V")
    assert rules == (Rule("/Acme/Admins", "acme", "admin"), Rule("team:a=b", "globex", "viewer"))


@pytest.mark.parametrize(
    "text",
    ["acme.com", "acme.com=acme", "acme.com=acme:member", "=acme:admin", "acme.com=:admin"],
)
def test_a_malformed_rule_names_the_variable_and_the_entry(text):
    with pytest.raises(ImproperlyConfigured) as refused:
        rules_parse(f"ok.com=acme:viewer,{text}", variable="SWITCHYARD_OIDC_DOMAINS")
    assert "SWITCHYARD_OIDC_DOMAINS" in str(refused.value)
    assert repr(text) in str(refused.value)


def test_domain_and_group_rules_combine_and_the_highest_role_wins():
    domains = rules_parse("acme.com=acme:viewer,acme.com=docs:developer", variable="D")
    groups = rules_parse("admins=acme:admin,ops=globex:developer,guests=acme:viewer", variable="G")
    grants = grants_for(
        email="Ann@ACME.com",
        groups={"admins", "guests"},
        domain_rules=domains,
        group_rules=groups,
    )
    assert grants == {"acme": "admin", "docs": "developer"}


def test_an_identity_no_rule_matches_gets_nothing():
    domains = rules_parse("acme.com=acme:viewer", variable="D")
    assert not grants_for(
        email="eve@acme.com.evil", groups=(), domain_rules=domains, group_rules=()
    )
    assert not grants_for(
        email="eve@evil.example", groups={"acme.com"}, domain_rules=domains, group_rules=()
    )


def test_a_groups_claim_may_be_a_list_or_one_name():
    assert claim_values(["a", "b", 3, None]) == {"a", "b"}
    assert claim_values("a") == {"a"}
    assert claim_values(None) == set()
    assert claim_values({"a": 1}) == set()


def test_single_sign_on_is_off_without_a_client_id_or_an_issuer(monkeypatch):
    assert _read(monkeypatch) is None
    assert _read(monkeypatch, SWITCHYARD_OIDC_ISSUER="https://id.example") is None
    assert _read(monkeypatch, SWITCHYARD_OIDC_CLIENT_ID="switchyard") is None
    partial = {"SWITCHYARD_OIDC_TOKEN_ENDPOINT": "https://id.example/token"}
    assert _read(monkeypatch, SWITCHYARD_OIDC_CLIENT_ID="switchyard", **partial) is None


def test_single_sign_on_reads_its_settings(monkeypatch, tmp_path):
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret\n")
    config = _read(
        monkeypatch,
        SWITCHYARD_OIDC_ISSUER="https://id.example/realms/acme/",
        SWITCHYARD_OIDC_CLIENT_ID="switchyard",
        SWITCHYARD_OIDC_CLIENT_SECRET_FILE=str(secret_file),
        SWITCHYARD_OIDC_PROVIDER_NAME="Acme ID",
        SWITCHYARD_OIDC_DOMAINS="Acme.com=acme:developer",
        SWITCHYARD_OIDC_GROUPS="Admins=acme:admin",
        SWITCHYARD_OIDC_GROUPS_CLAIM="roles",
        SWITCHYARD_OIDC_CREATE_USERS="false",
        SWITCHYARD_OIDC_TOKEN_ENDPOINT="https://id.example/other-token",
    )
    assert config is not None
    assert config.issuer == "https://id.example/realms/acme"
    assert (config.client_id, config.client_secret) == ("switchyard", "s3cret")
    assert "s3cret" not in repr(config)
    assert config.provider_name == "Acme ID"
    assert config.scopes == "openid email profile"
    assert config.sign_algo == "RS256"
    assert config.domain_rules == (Rule("acme.com", "acme", "developer"),)
    assert config.group_rules == (Rule("Admins", "acme", "admin"),)
    assert config.groups_claim == "roles"
    assert config.create_users is False
    assert config.require_verified_email is True
    assert config.endpoints["token_endpoint"] == "https://id.example/other-token"
    assert config.endpoints["authorization_endpoint"] == ""


def test_explicit_endpoints_need_no_issuer(monkeypatch):
    endpoints = {
        "SWITCHYARD_OIDC_AUTHORIZATION_ENDPOINT": "https://id.example/auth",
        "SWITCHYARD_OIDC_TOKEN_ENDPOINT": "https://id.example/token",
        "SWITCHYARD_OIDC_USERINFO_ENDPOINT": "https://id.example/userinfo",
        "SWITCHYARD_OIDC_JWKS_URI": "https://id.example/jwks",
    }
    config = _read(monkeypatch, SWITCHYARD_OIDC_CLIENT_ID="switchyard", **endpoints)
    assert config is not None and config.issuer == ""


def test_a_bad_mapping_stops_the_process_at_start_up(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="SWITCHYARD_OIDC_GROUPS"):
        _read(
            monkeypatch,
            SWITCHYARD_OIDC_ISSUER="https://id.example",
            SWITCHYARD_OIDC_CLIENT_ID="switchyard",
            SWITCHYARD_OIDC_GROUPS="admins=acme:superuser",
        )


def test_password_login_off_drops_the_password_backend(monkeypatch):
    config = _read(
        monkeypatch,
        SWITCHYARD_OIDC_ISSUER="https://id.example",
        SWITCHYARD_OIDC_CLIENT_ID="switchyard",
    )
    assert sign_in_backends(sso=None, password_login=True) == [PASSWORD_BACKEND]
    assert sign_in_backends(sso=config, password_login=True) == [PASSWORD_BACKEND, SSO_BACKEND]
    assert sign_in_backends(sso=config, password_login=False) == [SSO_BACKEND]
    with pytest.raises(ImproperlyConfigured, match="SWITCHYARD_PASSWORD_LOGIN"):
        sign_in_backends(sso=None, password_login=False)


def _settings_of_a_process(**variables: str) -> subprocess.CompletedProcess[str]:
    """Django's settings as a process given ``variables`` loads them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_OIDC_")}
    env.update(variables)
    show = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.AUTHENTICATION_BACKENDS, s.SWITCHYARD_PASSWORD_LOGIN, "
        "s.SWITCHYARD_SSO and s.SWITCHYARD_SSO.provider_name]))"
    )
    return subprocess.run(
        [sys.executable, "-c", show], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_a_process_signs_in_as_its_environment_says():
    off = _settings_of_a_process()
    assert json.loads(off.stdout) == [[PASSWORD_BACKEND], True, None]
    on = _settings_of_a_process(
        SWITCHYARD_OIDC_ISSUER="https://id.example",
        SWITCHYARD_OIDC_CLIENT_ID="switchyard",
        SWITCHYARD_OIDC_PROVIDER_NAME="Acme ID",
        SWITCHYARD_PASSWORD_LOGIN="false",
    )
    assert json.loads(on.stdout) == [[SSO_BACKEND], False, "Acme ID"]
    refused = _settings_of_a_process(SWITCHYARD_PASSWORD_LOGIN="false")
    assert refused.returncode != 0
    assert "SWITCHYARD_PASSWORD_LOGIN=false leaves no way to sign in" in refused.stderr
