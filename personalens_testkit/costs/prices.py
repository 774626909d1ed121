"""The price table: US dollars per million tokens for each model id, so a run's calls can be costed.

The testkit ships one (``prices.toml``: the vendors' published list prices for the models our presets
and docs name, each with the date of the price list and where it was read) and the team's config
extends or replaces it entry by entry (``[tool.personalens.prices."MODEL-ID"]``). A model the table
does not price is **cost unknown** - never a guess from a similar name:

- a spec names its model as a run does (``openai:gpt-4o-mini``, ``bedrock:MODEL_ID``, ``local``) or bare;
  the spec itself is looked up first, then the model id in it;
- a Bedrock cross-region inference profile (``us.``, ``eu.``, ``apac.`` ... before the model id, or
  its ARN) is priced as its base model: a profile routes to the same model at the same price;
- an OpenAI dated snapshot (``gpt-4o-mini-2024-07-18``) is priced as its alias when the table has no
  entry of its own (``gpt-4o-2024-05-13`` has one: it costs more than ``gpt-4o``);
- nothing else: ``gpt-4o-mini`` is never priced as ``gpt-4o``;
- ``local`` and ``local:FILE.gguf`` are the embedded model, run on this machine at no charge per token.

One call's cost (:func:`call_cost`, its token counts in the provider's meaning: see :mod:`.spend`) and
a cost as a reader reads it (:func:`format_cost`) are here too: the ledger and the estimate share them.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from datetime import date
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import UsageError
from ..llm.backends import BACKENDS, ModelBackend

#: the prices are per this many tokens
PER_TOKENS = 1_000_000
#: how messages about the shipped file name it
SHIPPED = "personalens_testkit/costs/prices.toml"
RATES = ("input", "output", "cached_input", "cache_write")
KEYS = (*RATES, "read_on", "source")
_MISSING = object()


@dataclass(frozen=True)
class Price:
    """What one model's tokens cost, in US dollars per million tokens."""

    model: str
    input: float
    output: float
    #: prompt tokens read from the provider's prompt cache (equal to ``input`` where there is no discount)
    cached_input: float
    #: prompt tokens written to the cache, where the provider charges for it apart (None: at ``input``)
    cache_write: float | None
    #: the date of the price list the numbers come from (``set in config`` for the team's own)
    read_on: str
    #: where they come from: the vendor's pricing page, or the config table that set them
    source: str

    @property
    def free(self) -> bool:
        """Every token costs nothing (the embedded model): a call costs 0 whatever its token counts."""
        return not any((self.input, self.output, self.cached_input, self.cache_write))


#: what a provider's batch engine charges, as a share of its on-demand price: the OpenAI Batch API and Amazon
#: Bedrock's batch inference both bill 50 % of the on-demand input and output prices (their pricing pages)
BATCH_SHARE = 0.5


def batch_price(price: Price) -> Price:
    """A model's price on its provider's batch engine: :data:`BATCH_SHARE` of each of its rates."""
    return replace(price, input=price.input * BATCH_SHARE, output=price.output * BATCH_SHARE,
                   cached_input=price.cached_input * BATCH_SHARE,
                   cache_write=None if price.cache_write is None else price.cache_write * BATCH_SHARE,
                   source=f"{price.source}; on a batch engine {BATCH_SHARE:.0%} of it")


@dataclass(frozen=True)
class PriceTable:
    """Prices by model id (or by whole spec, where the config keys one so)."""

    entries: Mapping[str, Price]
    #: specs looked up so far (a run's report prices each of its calls: a few specs, many times)
    _found: dict[str, Price | None] = field(default_factory=dict, init=False, compare=False, repr=False)

    def lookup(self, spec: str) -> Price | None:
        """The price of the model a spec names, or None: cost unknown."""
        try:
            return self._found[spec]
        except KeyError:
            pass
        found = next((self.entries[name] for name in candidates(spec) if name in self.entries), None)
        if len(self._found) < 1024:
            self._found[spec] = found
        return found

    def __contains__(self, spec: object) -> bool:
        return isinstance(spec, str) and self.lookup(spec) is not None

    def __len__(self) -> int:
        return len(self.entries)


def split_spec(spec: str) -> tuple[str, str]:
    """A spec's backend and model id (``("", spec)`` for a bare model id)."""
    backend, sep, rest = spec.partition(":")
    return (backend, rest) if sep and backend in BACKENDS else ("", spec)


def _backend(spec: str) -> ModelBackend | None:
    """The backend a spec names (None: a bare model id)."""
    backend, _ = split_spec(spec)
    return BACKENDS.get(backend or spec)  # a bare backend name ("local") is a whole spec


def reported_spec(text: str) -> str:
    """The spec in a model as rows and reports name it: ``name (spec)`` for a [models] entry, else the spec."""
    match = re.fullmatch(r"[^()\s]+ \((.+)\)", text.strip())
    return match.group(1) if match else text


def config_key(spec: str) -> str:
    """The key of ``[tool.personalens.prices."KEY"]`` that prices a spec: its model id as written."""
    backend = _backend(spec)
    return backend.name if backend is not None and backend.embedded else split_spec(spec)[1]


def candidates(spec: str) -> list[str]:
    """The table keys that may price a spec, most specific first (see the module's rules)."""
    backend, model = _backend(spec), split_spec(spec)[1]
    if backend is not None:  # its own keys
        names = backend.price_keys(spec, model)
    else:  # a bare model id: as any remote backend would price it
        names = [key for b in BACKENDS.values() if not b.embedded for key in b.price_keys(spec, model)]
    return list(dict.fromkeys(name for name in names if name))


@lru_cache(maxsize=1)
def shipped_prices() -> Mapping[str, Price]:
    """The shipped table, read once."""
    text = resources.files(__package__).joinpath("prices.toml").read_text(encoding="utf-8")
    table = tomllib.loads(text)
    return MappingProxyType({model: _price(model, entry, SHIPPED, shipped=True) for model, entry in table.items()})


def load_prices(overrides: Mapping[str, Any] | None = None, *, where: str = "[tool.personalens.prices]") -> PriceTable:
    """The shipped table with the config's entries over it: a new model id extends it, a known one replaces
    its entry whole. ``where`` names the config table in messages (``[prices]`` in personalens.toml); an entry
    that is not valid is a :class:`UsageError` of one line naming the table, the model id and the field."""
    entries = dict(shipped_prices())
    if overrides is None:
        return PriceTable(MappingProxyType(entries))
    if not isinstance(overrides, Mapping):
        raise UsageError(f"{where} must be a table of model ids, each a table of prices (got {_shown(overrides)})")
    for model, entry in overrides.items():
        entries[model] = _price(model, entry, where, shipped=False)
    return PriceTable(MappingProxyType(entries))


def _place(where: str, model: str) -> str:
    """Where an entry is, as its table header: ``[tool.personalens.prices."gpt-4o"]``."""
    quoted = json.dumps(model)
    return f"{where[:-1]}.{quoted}]" if where.startswith("[") and where.endswith("]") else f"{where}: [{quoted}]"


def _price(model: Any, entry: Any, where: str, *, shipped: bool) -> Price:
    if not isinstance(model, str) or not model.strip() or not model.isprintable():
        raise UsageError(f"{where}: {_shown(model)} is not a model id (a spec's model id, e.g. \"gpt-4o\")")
    place = _place(where, model)
    if not isinstance(entry, Mapping):
        raise UsageError(f"{place} must be a table with input and output in US dollars per million tokens "
                         f"(got {_shown(entry)})")
    unknown = [key for key in entry if key not in KEYS]
    if unknown:
        raise UsageError(f"{place}: unknown key {_shown(unknown[0])} (the keys are {', '.join(KEYS)})")
    rate = _rate(entry, "input", place)
    return Price(
        model=model, input=rate, output=_rate(entry, "output", place),
        cached_input=_rate(entry, "cached_input", place, default=rate),
        cache_write=_rate(entry, "cache_write", place, default=None),
        read_on=_text(entry, "read_on", place, "the date the price was read, as text",
                      default=_MISSING if shipped else "set in config"),
        source=_text(entry, "source", place, "where the price comes from, as text",
                     default=_MISSING if shipped else place),
    )


def _rate(entry: Mapping[str, Any], key: str, place: str, *, default: Any = _MISSING) -> Any:
    value = entry.get(key, _MISSING)
    if value is _MISSING and default is not _MISSING:
        return default
    # booleans are ints to Python, not numbers to a reader
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        got = "missing" if value is _MISSING else f"got {_shown(value)}"
        raise UsageError(f"{place}: {key} must be a number of US dollars per million tokens, 0 or more ({got})")
    return float(value)


def _text(entry: Mapping[str, Any], key: str, place: str, what: str, *, default: Any) -> str:
    value = entry.get(key, _MISSING)
    if value is _MISSING and default is not _MISSING:
        return default
    if isinstance(value, date):  # read_on = 2025-06-01, unquoted: a TOML date
        return value.isoformat()
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        got = "missing" if value is _MISSING else f"got {_shown(value)}"
        raise UsageError(f"{place}: {key} must be {what} ({got})")
    return value.strip()


def _shown(value: Any) -> str:
    """A value as a one-line message quotes it (TOML's spelling where it has one)."""
    if isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, str):
        shown = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, Mapping):
        shown = "a table"
    elif isinstance(value, (list, tuple)):
        shown = "a list"
    else:
        shown = repr(value)
    shown = shown if shown.isprintable() else ascii(shown)
    return shown if len(shown) <= 60 else shown[:57] + "..."


@lru_cache(maxsize=256)  # every call of a run is priced: a few specs, many times
def provider_counts_cached_in_prompt(spec: str) -> bool:
    """Whether the prompt count of a call to this model includes the tokens read from the cache (OpenAI's
    ``prompt_tokens`` does; Bedrock's ``inputTokens`` does not)."""
    backend = _backend(spec)
    return backend is None or backend.counts_cached_in_prompt


def call_cost(price: Price, spec: str, *, prompt_tokens: int, completion_tokens: int,
              cache_read_tokens: int | None = 0, cache_write_tokens: int | None = 0) -> float:
    """One call's cost in US dollars (token counts as the provider of ``spec`` reports them)."""
    read, write = cache_read_tokens or 0, cache_write_tokens or 0
    if provider_counts_cached_in_prompt(spec):
        dollars = max(prompt_tokens - read, 0) * price.input + read * price.cached_input
    else:
        write_rate = price.input if price.cache_write is None else price.cache_write
        dollars = prompt_tokens * price.input + read * price.cached_input + write * write_rate
    return (dollars + completion_tokens * price.output) / PER_TOKENS


def format_cost(value: float | None) -> str:
    """A cost as a reader reads it: ``$0``, ``<$0.0001``, ``$0.0123``, ``$0.50``, ``$12.35``, ``$1,234.56``;
    ``cost unknown`` for None."""
    if value is None or not math.isfinite(value):
        return "cost unknown"
    if value < 0:
        return "-" + format_cost(-value)
    if value == 0:
        return "$0"
    if value < 0.0001:
        return "<$0.0001"
    if value >= 1:
        return f"${value:,.2f}"
    places = max(2, 2 - math.floor(math.log10(value)))  # three significant digits below a dollar
    text = f"{value:.{places}f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"
