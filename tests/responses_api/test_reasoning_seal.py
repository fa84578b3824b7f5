"""Each organisation's reasoning seal is keyed by the platform key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.test import override_settings

from responses_api.store.seal import reasoning_seal
from responses_api.translate.sealing import SealBroken

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def test_tokens_are_bound_to_the_platform_key_and_survive_its_rotation():
    with override_settings(SWITCHYARD_ENCRYPTION_KEY=OLD):
        token = reasoning_seal(1).seal("thought")
    with override_settings(SWITCHYARD_ENCRYPTION_KEY=f"{NEW},{OLD}"):
        assert reasoning_seal(1).open(token) == "thought"
        with pytest.raises(SealBroken):
            reasoning_seal(2).open(token)
    with override_settings(SWITCHYARD_ENCRYPTION_KEY=NEW), pytest.raises(SealBroken):
        reasoning_seal(1).open(token)


def test_without_a_platform_key_the_seal_is_keyed_by_the_secret_key():
    with override_settings(SWITCHYARD_ENCRYPTION_KEY="", SECRET_KEY="a" * 50):
        token = reasoning_seal(1).seal("thought")
        assert reasoning_seal(1).open(token) == "thought"
    other = override_settings(SWITCHYARD_ENCRYPTION_KEY="", SECRET_KEY="b" * 50)
    with other, pytest.raises(SealBroken):
        reasoning_seal(1).open(token)
