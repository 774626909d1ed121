"""Costs: the shipped price table and the config's entries over it, which model a spec is priced as (and
which never), one call's cost in each provider's meaning of its token counts, a run's cost per role
with live and replayed calls apart and unknown parts never shown as a number, and the OpenAI cache
count read off the wire."""

from __future__ import annotations

import json
import math
import threading
import tomllib
from contextlib import contextmanager
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Iterator

import pytest

from personalens_testkit.costs.prices import KEYS, Price, PriceTable, load_prices
from personalens_testkit.costs.spend import (
    BOT, call_cost, cost_ledger, format_cost, provider_counts_cached_in_prompt,
)
from personalens_testkit.errors import UsageError
from personalens_testkit.llm.base import ChatRequest, Message
from personalens_testkit.llm.openai_compat import OpenAICompatibleChat
from personalens_testkit.results.rows import CallRow, ResultRow
from personalens_testkit.settings.presets import PAPER

HAIKU = "anthropic.claude-3-haiku-20240307-v1:0"
SONNET_V2 = "anthropic.claude-3-5-sonnet-20241022-v2:0"


@pytest.fixture(scope="module")
def table() -> PriceTable:
    return load_prices()


# ---------------------------------------------------------------- which model a spec is priced as

@pytest.mark.parametrize("spec, model", [
    ("local", "local"),
    ("local:models/other.gguf", "local"),
    ("openai:gpt-4o-mini", "gpt-4o-mini"),
    ("openai:gpt-4o", "gpt-4o"),
    ("gpt-4.1-nano", "gpt-4.1-nano"),
    (f"bedrock:{HAIKU}", HAIKU),
    ("bedrock:anthropic.claude-3-sonnet-20240229-v1:0", "anthropic.claude-3-sonnet-20240229-v1:0"),
    (HAIKU, HAIKU),
    # cross-region inference profiles, as the id and as an ARN, price as the base model
    (f"bedrock:us.{SONNET_V2}", SONNET_V2),
    (f"bedrock:eu.{SONNET_V2}", SONNET_V2),
    (f"bedrock:apac.{SONNET_V2}", SONNET_V2),
    (f"us.{SONNET_V2}", SONNET_V2),
    ("bedrock:us.meta.llama3-1-8b-instruct-v1:0", "meta.llama3-1-8b-instruct-v1:0"),
    (f"bedrock:arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.{SONNET_V2}", SONNET_V2),
    # an OpenAI dated snapshot prices as its alias, unless the table lists the snapshot itself
    ("openai:gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("openai:gpt-4o-2024-05-13", "gpt-4o-2024-05-13"),
    ("openai:o3-mini-2025-01-31", "o3-mini"),
])
def test_a_spec_is_priced_as_its_model(table, spec, model):
    price = table.lookup(spec)
    assert price is not None and price.model == model


@pytest.mark.parametrize("spec", [
    "openai:gpt-4o-mini-preview",        # never guessed from a longer or shorter name
    "openai:gpt-4",                      # not gpt-4o, not gpt-4-turbo
    "openai:mystery-model",
    "bedrock:anthropic.claude-3-haiku",  # not a Bedrock model id
    f"bedrock:{HAIKU}-2024-07-18",       # the dated-snapshot rule is OpenAI's only
    "openai:us.gpt-4o",                  # the inference-profile rule is Bedrock's only
    "mystery:gpt-4o",
    "",
])
def test_a_model_without_a_price_is_cost_unknown(table, spec):
    assert table.lookup(spec) is None and spec not in table


def test_gpt_4o_mini_is_never_priced_as_gpt_4o():
    only_4o = load_prices({"gpt-4o": {"input": 1, "output": 1}})
    without_mini = PriceTable({name: price for name, price in only_4o.entries.items() if "mini" not in name})
    assert without_mini.lookup("openai:gpt-4o").model == "gpt-4o"
    assert without_mini.lookup("openai:gpt-4o-mini") is None
    assert without_mini.lookup("openai:gpt-4o-mini-2024-07-18") is None
    assert load_prices().lookup("openai:gpt-4o-mini").input != load_prices().lookup("openai:gpt-4o").input


def test_the_embedded_model_costs_nothing(table):
    price = table.lookup("local")
    assert (price.input, price.output, price.cached_input) == (0, 0, 0) and price.free
    assert not table.lookup("openai:gpt-4o").free


def test_the_shipped_table_prices_the_models_of_the_paper_preset(table):
    for key in ("user_model", "judge_model", "assistant_model"):
        assert table.lookup(PAPER[key]) is not None, PAPER[key]


# ---------------------------------------------------------------- the shipped file

def test_every_shipped_entry_is_complete():
    text = resources.files("personalens_testkit.costs").joinpath("prices.toml").read_text(encoding="utf-8")
    shipped = tomllib.loads(text)
    assert len(shipped) >= 20 and len(load_prices()) == len(shipped)
    for model, entry in shipped.items():
        assert set(entry) <= set(KEYS), model
        assert {"input", "output", "cached_input", "read_on", "source"} <= set(entry), model
        for key in ("input", "output", "cached_input", "cache_write"):
            if key in entry:
                assert type(entry[key]) in (int, float) and entry[key] >= 0, (model, key)
        assert entry["cached_input"] <= entry["input"], model
        assert isinstance(entry["read_on"], str) and entry["read_on"][:2] == "20", model
        assert isinstance(entry["source"], str) and entry["source"].strip(), model


# ---------------------------------------------------------------- the config's entries

def test_a_config_entry_extends_the_table():
    table = load_prices({"my-gateway-model": {"input": 1, "output": 2.5}})
    price = table.lookup("openai:my-gateway-model")
    assert (price.input, price.output, price.cached_input, price.cache_write) == (1.0, 2.5, 1.0, None)
    assert price.read_on == "set in config" and price.source == '[tool.personalens.prices."my-gateway-model"]'
    assert table.lookup("openai:gpt-4o") == load_prices().lookup("openai:gpt-4o")


def test_a_config_entry_replaces_a_shipped_one_whole_and_only_in_its_table():
    table = load_prices({"gpt-4o": {"input": 2, "output": 8, "cached_input": 0.5, "read_on": date(2025, 6, 1),
                                    "source": "our contract"}})
    price = table.lookup("openai:gpt-4o-2024-11-20")
    assert (price.input, price.output, price.cached_input) == (2.0, 8.0, 0.5)
    assert (price.read_on, price.source) == ("2025-06-01", "our contract")
    assert load_prices().lookup("openai:gpt-4o").input == 2.5  # the shipped table is untouched


def test_a_config_entry_may_price_a_whole_spec():
    table = load_prices({"openai:llama3": {"input": 0.1, "output": 0.2}}, where="[prices]")
    assert table.lookup("openai:llama3").input == 0.1 and table.lookup("llama3") is None
    assert table.lookup("openai:llama3").source == '[prices."openai:llama3"]'


NUMBER = "must be a number of US dollars per million tokens, 0 or more"


@pytest.mark.parametrize("entry, message", [
    ({"input": "cheap", "output": 1}, f'input {NUMBER} (got "cheap")'),
    ({"output": 1}, f"input {NUMBER} (missing)"),
    ({"input": 1}, f"output {NUMBER} (missing)"),
    ({"input": -1, "output": 1}, f"input {NUMBER} (got -1)"),
    ({"input": True, "output": 1}, f"input {NUMBER} (got true)"),
    ({"input": 1, "output": math.inf}, f"output {NUMBER} (got inf)"),
    ({"input": 1, "output": math.nan}, f"output {NUMBER} (got nan)"),
    ({"input": 1, "output": [1]}, f"output {NUMBER} (got a list)"),
    ({"input": 1, "output": 1, "cached_input": "x"}, f'cached_input {NUMBER} (got "x")'),
    ({"input": 1, "output": 1, "cache_write": -0.5}, f"cache_write {NUMBER} (got -0.5)"),
    ({"input": 1, "output": 1, "read_on": 5}, "read_on must be the date the price was read, as text (got 5)"),
    ({"input": 1, "output": 1, "read_on": " "}, 'read_on must be the date the price was read, as text (got " ")'),
    ({"input": 1, "output": 1, "source": {}}, "source must be where the price comes from, as text (got a table)"),
    ({"input": 1, "output": 1, "inptu": 1},
     'unknown key "inptu" (the keys are input, output, cached_input, cache_write, read_on, source)'),
])
def test_an_invalid_config_entry_is_one_line_naming_the_model_and_the_field(entry, message):
    with pytest.raises(UsageError) as err:
        load_prices({"gpt-4o": entry})
    assert str(err.value) == f'[tool.personalens.prices."gpt-4o"]: {message}'


def test_the_exact_messages_of_entries_that_are_not_tables():
    with pytest.raises(UsageError) as err:
        load_prices({"gpt-4o": 3}, where="[prices]")
    assert str(err.value) == '[prices."gpt-4o"] must be a table with input and output in US dollars per million tokens (got 3)'
    with pytest.raises(UsageError) as err:
        load_prices(["gpt-4o"])  # type: ignore[arg-type]
    assert str(err.value) == "[tool.personalens.prices] must be a table of model ids, each a table of prices (got a list)"
    with pytest.raises(UsageError) as err:
        load_prices({"": {"input": 1, "output": 1}})
    assert str(err.value) == '[tool.personalens.prices]: "" is not a model id (a spec\'s model id, e.g. "gpt-4o")'
    with pytest.raises(UsageError) as err:
        load_prices({"bad\nid": {"input": "x", "output": 1}})
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- one call's cost

PRICE = Price(model="m", input=2.0, output=10.0, cached_input=0.5, cache_write=4.0, read_on="2025-05", source="test")


def test_openai_counts_cached_tokens_inside_the_prompt():
    assert provider_counts_cached_in_prompt("openai:m") and provider_counts_cached_in_prompt("local")
    # 600 uncached x $2 + 400 cached x $0.5 + 100 out x $10 = $2,400 per million calls' worth
    assert call_cost(PRICE, "openai:m", prompt_tokens=1000, completion_tokens=100, cache_read_tokens=400,
                     cache_write_tokens=300) == pytest.approx(0.0024)
    assert call_cost(PRICE, "openai:m", prompt_tokens=1000, completion_tokens=100) == pytest.approx(0.003)
    # a count of cached tokens above the prompt's is not a negative charge
    assert call_cost(PRICE, "openai:m", prompt_tokens=10, completion_tokens=0, cache_read_tokens=50) == pytest.approx(25e-6)


def test_bedrock_counts_cache_reads_and_writes_apart_from_the_prompt():
    assert not provider_counts_cached_in_prompt("bedrock:m")
    # 1000 x $2 + 400 read x $0.5 + 300 written x $4 + 100 out x $10
    assert call_cost(PRICE, "bedrock:m", prompt_tokens=1000, completion_tokens=100, cache_read_tokens=400,
                     cache_write_tokens=300) == pytest.approx(0.0044)
    no_write_price = Price(model="m", input=2.0, output=10.0, cached_input=0.5, cache_write=None, read_on="", source="")
    # writes at the input price where the table has none
    assert call_cost(no_write_price, "bedrock:m", prompt_tokens=1000, completion_tokens=100, cache_read_tokens=400,
                     cache_write_tokens=300) == pytest.approx(0.0038)
    free_write = Price(model="m", input=2.0, output=10.0, cached_input=0.5, cache_write=0.0, read_on="", source="")
    assert call_cost(free_write, "bedrock:m", prompt_tokens=0, completion_tokens=0, cache_write_tokens=300) == 0


# ---------------------------------------------------------------- a run's cost per role

PRICES = {"user-m": {"input": 1, "output": 2}, "judge-m": {"input": 3, "output": 4, "read_on": "2025-06-01"}}


def call(role: str, prompt: int | None, completion: int | None, *, replayed: bool = False, **kw: Any) -> CallRow:
    return CallRow(role=role, label="reply", turn=1, seconds=0.1, prompt_tokens=prompt, completion_tokens=completion,
                   replayed=replayed, **kw)


def row(calls: list[CallRow], *, user: str = "openai:user-m", judge: str = "openai:judge-m",
        assistant: str | None = "openai:user-m", scenario: str = "user7-SD-Alarm-task-1") -> ResultRow:
    return ResultRow(scenario_id=scenario, status="passed", user_model=user, judge_model=judge,
                     assistant_model=assistant, assistant_kind="reference" if assistant else "http", calls=calls)


def test_live_and_replayed_calls_are_apart():
    ledger = cost_ledger([row([
        call("user_agent", 1000, 500), call("user_agent", 2000, 0, replayed=True),
        call("assistant", 0, 1000), call("judge", 1000, 1000), call("judge", 1000, 1000, replayed=True),
    ])], load_prices(PRICES))
    user, assistant, judge = (ledger.roles[r] for r in ("user_agent", "assistant", "judge"))
    assert (user.spent, user.replayed_value, user.live_calls, user.replayed_calls) == (
        pytest.approx(0.002), pytest.approx(0.002), 1, 1)
    assert (assistant.spent, assistant.replayed_value) == (pytest.approx(0.002), 0.0)
    assert (judge.spent, judge.replayed_value) == (pytest.approx(0.007), pytest.approx(0.007))
    assert ledger.total_spent == pytest.approx(0.011) and ledger.known_spent == pytest.approx(0.011)
    assert ledger.total_replayed_value == pytest.approx(0.009) and ledger.currency == "USD"
    assert all(cost.priced and cost.reason == "" for cost in ledger.roles.values())
    assert (user.model, user.price_read_on, judge.price_read_on) == ("openai:user-m", "set in config", "2025-06-01")


def test_a_bots_own_cost_is_unknown_and_the_rest_still_counts():
    prices = load_prices(PRICES)
    ledger = cost_ledger([row([call("user_agent", 1000, 500), call("assistant", None, None),
                               call("judge", 1000, 1000)], assistant=None)], prices)
    bot = ledger.roles["assistant"]
    assert (bot.model, bot.priced, bot.spent, bot.reason) == (None, False, None, BOT)
    assert BOT == "the bot under test reports no model; its own cost is not counted"
    assert ledger.total_spent is None and ledger.known_spent == pytest.approx(0.009)
    # a bot that made no live call spent nothing
    replayed_bot = cost_ledger([row([call("assistant", None, None, replayed=True)], assistant=None)], prices)
    assert replayed_bot.roles["assistant"].spent == 0.0 and replayed_bot.total_spent == 0.0
    assert replayed_bot.roles["assistant"].replayed_value is None and replayed_bot.total_replayed_value is None


def test_a_live_call_without_token_counts_leaves_its_role_unknown_never_partial():
    ledger = cost_ledger([row([call("user_agent", 1000, 500), call("judge", 1000, 1000), call("judge", None, 30),
                               call("judge", 5, None, replayed=True)])], load_prices(PRICES))
    judge = ledger.roles["judge"]
    assert (judge.spent, judge.unpriced_calls, judge.live_calls, judge.replayed_value) == (None, 1, 2, None)
    assert judge.reason == "1 live call(s) without token counts; 1 replayed call(s) without token counts"
    assert judge.known_spent == pytest.approx(0.007)  # the counted call: a lower bound
    assert ledger.total_spent is None
    assert ledger.known_spent == pytest.approx(0.002 + 0.007)  # the user agent's whole, the judge's known part
    assert ledger.roles["user_agent"].spent == pytest.approx(0.002)


def test_a_model_without_a_price_names_the_config_key_that_would_price_it():
    ledger = cost_ledger([row([call("user_agent", 1000, 500), call("judge", 1000, 1000)],
                              judge="openai:mystery-model")], load_prices(PRICES))
    judge = ledger.roles["judge"]
    assert (judge.priced, judge.spent, judge.price_read_on) == (False, None, None)
    assert judge.reason == 'no price for openai:mystery-model (add [tool.personalens.prices."mystery-model"])'
    assert ledger.total_spent is None and ledger.known_spent == pytest.approx(0.002)
    replayed = cost_ledger([row([call("judge", 1000, 1000, replayed=True)], judge="bedrock:us.mystery")],
                           load_prices(PRICES))
    assert replayed.total_spent == 0.0 and replayed.total_replayed_value is None
    assert replayed.roles["judge"].reason == 'no price for bedrock:us.mystery (add [tool.personalens.prices."us.mystery"])'


def test_rows_that_disagree_are_each_priced_by_their_own_model():
    ledger = cost_ledger([row([call("judge", 1000, 0)]), row([call("judge", 1000, 0)], judge="openai:user-m")],
                         load_prices(PRICES))
    judge = ledger.roles["judge"]
    assert judge.spent == pytest.approx(0.003 + 0.001)
    assert (judge.model, judge.price_read_on) == ("openai:judge-m, openai:user-m", "2025-06-01, set in config")


def test_calls_of_a_free_model_cost_nothing_with_or_without_counts_and_cache_reads_are_cached_input():
    prices = load_prices({"cached-m": {"input": 2, "output": 0, "cached_input": 0.5}})
    ledger = cost_ledger([row([call("user_agent", None, None), call("judge", 1000, 0, cache_read_tokens=400)],
                              user="local", judge="openai:cached-m")], prices)
    assert ledger.roles["user_agent"].spent == 0.0 and ledger.roles["user_agent"].priced
    assert ledger.roles["judge"].spent == pytest.approx((600 * 2 + 400 * 0.5) / 1e6)


@pytest.mark.parametrize("value, shown", [
    (None, "cost unknown"), (0, "$0"), (0.0, "$0"), (0.00004, "<$0.0001"), (0.0001, "$0.0001"),
    (0.00012, "$0.00012"), (0.0123, "$0.0123"), (0.01234, "$0.0123"), (0.1, "$0.10"), (0.5, "$0.50"),
    (0.123456, "$0.123"), (0.99999, "$1.00"), (1, "$1.00"), (12.3456, "$12.35"), (1234.561, "$1,234.56"),
    (math.nan, "cost unknown"),
])
def test_format_cost(value, shown):
    assert format_cost(value) == shown


# ---------------------------------------------------------------- the OpenAI cache count, off the wire

@contextmanager
def answering(usage: Any) -> Iterator[str]:
    """A loopback OpenAI-compatible server whose every answer reports ``usage``."""
    body = json.dumps({"model": "gpt-4o-mini", "usage": usage, "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def ask(url: str):
    chat = OpenAICompatibleChat(spec="openai:gpt-4o-mini", base_url=url, model="gpt-4o-mini")
    try:
        return chat.complete(ChatRequest(messages=(Message("user", "hello"),), purpose="user_agent"))
    finally:
        chat.close()


def test_the_cached_tokens_an_openai_server_reports_are_the_calls_cache_reads():
    with answering({"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 40}}) as url:
        answer = ask(url)
    assert (answer.prompt_tokens, answer.completion_tokens, answer.cache_read_tokens) == (100, 10, 40)
    assert answer.cache_write_tokens is None
    assert call_cost(PRICE, "openai:gpt-4o-mini", prompt_tokens=100, completion_tokens=10,
                     cache_read_tokens=answer.cache_read_tokens) == pytest.approx((60 * 2 + 40 * 0.5 + 10 * 10) / 1e6)


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": "x"}},
    {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": -1}},
    {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": True}},
    {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 1.5}},
    {"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": None}},
    {"prompt_tokens": 100, "prompt_tokens_details": {}},
    {"prompt_tokens": 100, "prompt_tokens_details": [40]},
    {"prompt_tokens": 100, "prompt_tokens_details": "40"},
    {"prompt_tokens": 100},
    "lots",
    None,
])
def test_a_cache_count_that_is_not_one_is_none(usage):
    with answering(usage) as url:
        answer = ask(url)
    assert answer.cache_read_tokens is None and answer.text == "Hi"
