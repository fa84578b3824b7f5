"""Is a model ready for Codex? ``manage.py model_check`` asks it, through Switchyard.

Every capability (``checks/capabilities.py``) is one small request to the
API's own ASGI application (:class:`responses_api.edge.http.ApiConsumer`),
in-process, with real HTTP from there to the backend: the path a client's
request takes, translation included. Here they are run, and their results
kept as a :class:`responses_api.models.ModelCheck`.

The check authenticates as the organisation with a key of its own, created
for the run (expiring within the hour, marked ``is_check``: no keys list
shows it) and revoked after it, both audited as whoever started the check;
the rows of that key are marked ``is_check``
(:data:`responses_api.pipeline.exchange.check_keys`), and count in neither
the roll-ups the dashboard reads nor the month's spend.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from django.utils import timezone

from accounts.audit import CLI, Actor
from accounts.models import Organisation
from responses_api.checks.capabilities import CHECKS
from responses_api.checks.client import (
    REQUEST_TIMEOUT,
    CheckError,
    Client,
    Context,
    Result,
)
from responses_api.models import Backend, ModelCheck, ServedModel
from responses_api.pipeline import exchange as exchange_module


def resolve(
    org_slug: str, model_id: str, backend_name: str | None
) -> tuple[ServedModel, Backend | None]:
    organisation = Organisation.objects.filter(slug=org_slug).first()
    if organisation is None:
        raise CheckError(f"No organisation {org_slug!r}.")
    model = ServedModel.objects.filter(organisation=organisation, public_id=model_id).first()
    if model is None:
        raise CheckError(f"Organisation {org_slug!r} has no model {model_id!r}.")
    backends = model.backends.all()
    if backend_name:
        backend = backends.filter(name=backend_name).first()
        if backend is None:
            raise CheckError(f"Model {model_id!r} is not deployed on a backend {backend_name!r}.")
        return model, backend
    only = list(backends[:2])
    return model, only[0] if len(only) == 1 else None


async def _run(ctx: Context, only: tuple[str, ...] | None) -> list[Result]:
    results = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        if only and name not in only:
            continue
        try:
            results.append(await check(ctx))
        except Exception as error:  # one broken capability must not hide the others
            results.append(Result(name, False, f"the check itself failed: {error!r}"))
    return results


def run_check(
    org_slug: str,
    model_id: str,
    backend_name: str | None = None,
    *,
    timeout: float = REQUEST_TIMEOUT,
    only: tuple[str, ...] | None = None,
    actor: Actor = CLI,
) -> ModelCheck:
    """Run every capability against the model and store the results; its
    key's creation and revocation are audited as ``actor``'s."""
    from accounts.services.api_keys import api_key_create, api_key_revoke
    from responses_api.backends.client import close_clients

    model, backend = resolve(org_slug, model_id, backend_name)
    started = timezone.now()
    key, raw = api_key_create(
        organisation=model.organisation,
        name="model check",
        expires_at=started + timedelta(hours=1),
        actor=actor,
        is_check=True,
    )
    exchange_module.check_keys.add(str(key.id))
    ctx = Context(
        client=Client(raw, str(backend.id) if backend_name and backend else None, timeout),
        model=model,
        backend=backend,
        key_id=str(key.id),
    )

    async def main() -> list[Result]:
        try:
            return await _run(ctx, only)
        finally:
            from responses_api.usage.sink import sink

            with contextlib.suppress(Exception):
                await sink.flush()
            await close_clients()

    try:
        results = asyncio.run(main())
    finally:
        api_key_revoke(api_key=key, actor=actor)
        exchange_module.check_keys.discard(str(key.id))
    return ModelCheck.objects.create(
        model=model,
        backend=backend,
        started_at=started,
        results=[asdict(r) for r in results],
        passed=all(r.passed for r in results),
    )


def table(check: ModelCheck) -> str:
    """The results as a plain-text table, a failure's raw answer under it."""
    lines = [f"{'capability':<16} {'result':<7} detail"]
    for result in check.results:
        verdict = "skip" if result.get("skipped") else "pass" if result["passed"] else "FAIL"
        lines.append(f"{result['name']:<16} {verdict:<7} {result['detail']}")
        if not result["passed"] and result.get("raw"):
            lines.append(f"{'':<24} raw: {result['raw'][:600]}")
    lines.append(f"{'overall':<16} {'pass' if check.passed else 'FAIL'}")
    return "\n".join(lines)


def as_json(check: ModelCheck) -> dict[str, Any]:
    return {
        "id": check.id,
        "organisation": check.model.organisation.slug,
        "model": check.model.public_id,
        "backend": check.backend.name if check.backend else None,
        "started_at": check.started_at.isoformat(),
        "passed": check.passed,
        "results": check.results,
    }
