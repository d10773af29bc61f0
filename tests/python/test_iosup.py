"""`iommulab.iosup`: S3.5's three groups with a user's churn (a dict or TOML), the same
numbers for the same run, and bad fields named by key."""

from __future__ import annotations

import pytest

import iommulab

SHORT = {"churn": {"minutes": 5}}


def test_the_pool_ends_the_flushes() -> None:
    r = iommulab.iosup(SHORT)
    off, pre, dyn = r["groups"]
    assert [g["group"] for g in r["groups"]] == [
        "cache-disabled",
        "cache-pre-enabled",
        "cache-dynamic-enabled",
    ]
    assert pre["flushes_per_minute"] < 0.05 * off["flushes_per_minute"]
    assert dyn["shrinks"] is True and pre["shrinks"] is False
    assert r["alloc_change"] < 0 and r["free_change"] < 0
    # S3.5's Xen 4.2.1 invalidates nothing on a type change; XSA-78's fix does.
    assert r["setup"]["unmap_flush"] == "skipped"
    assert off["invalidations_per_minute"] == 0
    fixed = iommulab.iosup({**SHORT, "setup": {"unmap_flush": "invalidates"}})
    assert fixed["groups"][0]["invalidations_per_minute"] > 0
    # Deterministic: the same run gives the same numbers, from a dict or TOML.
    assert iommulab.iosup("[churn]\nminutes = 5\n")["groups"] == r["groups"]


def test_bad_fields_are_named() -> None:
    with pytest.raises(iommulab.ConfigError, match="forks_per_minit"):
        iommulab.iosup({"churn": {"forks_per_minit": 3}})
    with pytest.raises(iommulab.ConfigError, match="churn.minutes"):
        iommulab.iosup({"churn": {"minutes": 0}})
    with pytest.raises(iommulab.ConfigError, match="forks_per_minute"):
        iommulab.iosup({"churn": {"minutes": 5, "forks_per_minute": 0}})
