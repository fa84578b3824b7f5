"""This month's spend against the monthly limits, as the console shows it
(the keys page, the dashboard): from the usage rows, through
:mod:`responses_api.usage.monthly`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from accounts.models import ApiKey, Organisation
from responses_api.usage.monthly import month_spent, month_spent_by_key


@dataclass(frozen=True, slots=True)
class Limit:
    used: Decimal | int
    limit: Decimal | int
    warning_percent: int

    @property
    def percent(self) -> float:
        return float(100 * self.used / self.limit)

    @property
    def state(self) -> str:
        """``over`` once reached (requests are refused), ``near`` past the warning."""
        if self.used >= self.limit:
            return "over"
        return "near" if self.percent >= self.warning_percent else ""


@dataclass(frozen=True, slots=True)
class MonthSpend:
    cost: Decimal
    tokens: int
    budget: Limit | None
    quota: Limit | None

    @property
    def state(self) -> str:
        states = {limit.state for limit in (self.budget, self.quota) if limit is not None}
        return "over" if "over" in states else "near" if "near" in states else ""


def _spend(
    spent: tuple[Decimal, int], budget: Decimal | None, quota: int | None, warning: int
) -> MonthSpend:
    cost, tokens = spent
    return MonthSpend(
        cost,
        tokens,
        Limit(cost, budget, warning) if budget is not None else None,
        Limit(tokens, quota, warning) if quota is not None else None,
    )


def organisation_month(organisation: Organisation) -> MonthSpend:
    return _spend(
        month_spent(organisation.pk),
        organisation.monthly_budget,
        organisation.monthly_tokens,
        organisation.budget_warning_percent,
    )


def keys_month(organisation: Organisation, keys: Iterable[ApiKey]) -> dict[object, MonthSpend]:
    """Per key (by primary key): what it spent this month, against its limits."""
    spent = month_spent_by_key(organisation.pk)
    nothing = (Decimal(0), 0)
    warning = organisation.budget_warning_percent
    return {
        key.pk: _spend(
            spent.get(str(key.pk), nothing), key.monthly_budget, key.monthly_tokens, warning
        )
        for key in keys
    }
