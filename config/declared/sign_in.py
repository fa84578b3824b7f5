"""The console's sign-in: single sign-on with OpenID Connect, passwords and
the sign-in throttle (docs/admin/sso.md, docs/admin/console.md)."""

from __future__ import annotations

from config.declared.spec import COMMANDS, CONFIG, SECRET_ENV, WEB, Setting

TITLE = "Sign-in"

_OIDC = (WEB,)

SETTINGS = (
    Setting(
        "SWITCHYARD_OIDC_ISSUER",
        "url",
        "",
        "The identity provider's issuer URL; the endpoints come from its "
        "`/.well-known/openid-configuration`. Single sign-on is off until it (or every "
        "endpoint) and a client id are set.",
        _OIDC,
        placement=CONFIG,
    ),
    Setting(
        "SWITCHYARD_OIDC_CLIENT_ID",
        "str",
        "",
        "The client registered at the provider.",
        _OIDC,
        placement=CONFIG,
    ),
    Setting(
        "SWITCHYARD_OIDC_CLIENT_SECRET",
        "str",
        "",
        "The client's secret; issuer, client id and the rest are not secret.",
        _OIDC,
        secret=True,
        placement=SECRET_ENV,
    ),
    Setting(
        "SWITCHYARD_OIDC_AUTHORIZATION_ENDPOINT",
        "url",
        "",
        "Replaces the discovered authorization endpoint; with all four endpoints set, no "
        "issuer is needed (nor checked in ID tokens).",
        _OIDC,
        shown_default="from discovery",
    ),
    Setting(
        "SWITCHYARD_OIDC_TOKEN_ENDPOINT",
        "url",
        "",
        "Replaces the discovered token endpoint.",
        _OIDC,
        shown_default="from discovery",
    ),
    Setting(
        "SWITCHYARD_OIDC_USERINFO_ENDPOINT",
        "url",
        "",
        "Replaces the discovered userinfo endpoint.",
        _OIDC,
        shown_default="from discovery",
    ),
    Setting(
        "SWITCHYARD_OIDC_JWKS_URI",
        "url",
        "",
        "Replaces the discovered JWKS address (the keys that sign ID tokens).",
        _OIDC,
        shown_default="from discovery",
    ),
    Setting(
        "SWITCHYARD_OIDC_PROVIDER_NAME",
        "str",
        "single sign-on",
        'The sign-in button says "Sign in with" this.',
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_OIDC_SCOPES",
        "str",
        "openid email profile",
        "The scopes asked for; add the one that makes your provider send groups, if it needs one.",
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_OIDC_DOMAINS",
        "str",
        "",
        "Rules by e-mail domain, e.g. `acme.com=acme:developer` (docs/admin/sso.md).",
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_OIDC_GROUPS",
        "str",
        "",
        "Rules by group name, e.g. `switchyard-admins=acme:admin`.",
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_OIDC_GROUPS_CLAIM",
        "str",
        "groups",
        "The claim of the ID token or userinfo that holds the groups (a list, or one name).",
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_OIDC_CREATE_USERS",
        "bool",
        True,
        "`false`: only people who already have an account here may sign in.",
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_OIDC_REQUIRE_VERIFIED_EMAIL",
        "bool",
        True,
        "`false` also accepts an `email` the provider does not mark `email_verified` (only for "
        "a provider that verifies every address).",
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_OIDC_SIGN_ALGO",
        "str",
        "RS256",
        "The ID tokens' signature algorithm (keys from the provider's JWKS).",
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_OIDC_TIMEOUT",
        "float",
        10.0,
        "Seconds for each request to the provider.",
        _OIDC,
    ),
    Setting(
        "SWITCHYARD_PASSWORD_LOGIN",
        "bool",
        True,
        "`false`: no password is accepted, in the console or at `/admin/`; start-up fails "
        "unless single sign-on is configured.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_LOGIN_ACCOUNT_LIMIT",
        "int",
        5,
        "Failed sign-ins for one account, within the window, that lock it until the window "
        "(opened by the first failure) ends.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_LOGIN_IP_LIMIT",
        "int",
        20,
        "Failed sign-ins from one client address, within the window, that lock it.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_LOGIN_WINDOW_SECONDS",
        "int",
        15 * 60,
        "The sign-in throttle's window.",
        (WEB,),
    ),
    Setting(
        "SWITCHYARD_MEMBER_PASSWORD",
        "str",
        "",
        "The password `manage.py add_member` gives a new account when `--password` is not "
        "given, so that it stays out of the shell's history.",
        (COMMANDS,),
    ),
)
