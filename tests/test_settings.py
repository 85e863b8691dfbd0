"""Settings like Scrapy's: every RECRAWL_* value typed on the command line (a string)
is read as Scrapy's getters read it, or refused by name; misspelled names are
warned about once; the one budget rule."""

from __future__ import annotations

import logging

import pytest
from scrapy.settings import Settings

from scrapy_recrawl.core.budget import Share, budget_pages, parse_budget
from scrapy_recrawl.core.cycle import CycleConfig
from scrapy_recrawl.settings import DEFAULTS, KINDS, RecrawlSettingError, get, unknown_settings
from scrapy_recrawl.skip import skip_mode
from scrapy_recrawl.startup import check_settings, enabled

#: one ``-s NAME=VALUE`` string per setting, and what the crawl reads from it
FROM_THE_COMMAND_LINE = {
    "RECRAWL_ENABLED": ("false", False),
    "RECRAWL_STORE": ("/var/lib/crawl/news.sqlite3", "/var/lib/crawl/news.sqlite3"),
    "RECRAWL_SHARED_STORE": ("true", True),
    "RECRAWL_STORE_CLASS": ("None", None),
    "RECRAWL_STORE_BODIES": ("0", False),
    "RECRAWL_KEEP_PREVIOUS": ("false", False),
    "RECRAWL_PREVIOUS_BODY_MAX_BYTES": ("65536", 65536),
    "RECRAWL_FLUSH_EVERY": ("100", 100),
    "RECRAWL_FLUSH_SECONDS": ("2.5", 2.5),
    "RECRAWL_SQLITE_LOG_MAXLEN": ("1000000", 1_000_000),
    "RECRAWL_SHINGLE_SIZE": ("5", 5),
    "RECRAWL_SIMHASH_DISTANCE": ("4", 4),
    "RECRAWL_MIN_ELEMENT_CHANGES": ("2", 2),
    "RECRAWL_IGNORE_XPATHS": ("//footer,//nav", ["//footer", "//nav"]),
    "RECRAWL_WATCH_XPATHS": ("//main,//h1", ["//main", "//h1"]),
    "RECRAWL_WATCH_CSS": ("p.price,h1", ["p.price", "h1"]),
    "RECRAWL_LEARN_BOILERPLATE": ("false", False),
    "RECRAWL_BOILERPLATE_PAIRS": ("3", 3),
    "RECRAWL_MAX_PARSE_BYTES": ("1000", 1000),
    "RECRAWL_CONDITIONAL_GET": ("False", False),
    "RECRAWL_SKIP_UNCHANGED": ("items", "items"),
    "RECRAWL_CHANGE_SIGNAL": ("Items", "items"),
    "RECRAWL_ITEM_CHANGES": ("true", True),
    "RECRAWL_ITEM_KEY": ("sku,size", ["sku", "size"]),
    "RECRAWL_ITEM_VALUES": ("1", True),
    "RECRAWL_ITEM_VALUES_MAX_BYTES": ("4096", 4096),
    "RECRAWL_CHANGE_FEED": (
        '{"s3://b/changes.jsonl": {"format": "jsonlines"}}',
        {"s3://b/changes.jsonl": {"format": "jsonlines"}},
    ),
    "RECRAWL_MAX_FAILURES": ("5", 5),
    "RECRAWL_UNSTORED_HEADERS": ("X-Api-Key,X-Session", ["X-Api-Key", "X-Session"]),
    "RECRAWL_UNSTORED_META": ("api_token", ["api_token"]),
    "RECRAWL_BUDGET": ("5%", Share(0.05)),  # read by parse_budget (core/budget.py)
    "RECRAWL_NEW_SHARE": ("0.3", 0.3),
    "RECRAWL_NEW_SHARE_MAX": ("0.6", 0.6),
    "RECRAWL_WARMUP_CYCLES": ("1", 1),
    "RECRAWL_BUDGET_MAX": ("5000", 5000),
    "RECRAWL_MAX_URLS_PER_HOST": ("100000", 100000),
    "RECRAWL_FRONTIER_MAX": ("0", 0),
    "RECRAWL_CONTINUOUS": ("true", True),
    "RECRAWL_CYCLE_SECONDS": ("60", 60),
    "RECRAWL_CYCLE_PERIOD": ("600", 600),
    "RECRAWL_MAX_CYCLES": ("3", 3),
    "RECRAWL_MONITOR_SHARE": ("0.1", 0.1),
    "RECRAWL_MAX_PER_DOMAIN": ("10", 10),
    "RECRAWL_ADAPTIVE_BUDGET": ("2.5", 2.5),
    "RECRAWL_PROBE": ("True", True),
    "RECRAWL_PROBE_OFFSETS": ("4,6,9", [4, 6, 9]),
    "RECRAWL_PROBE_SHARE": ("0.5", 0.5),
    "RECRAWL_BASKETS": ("[4, 12, 24]", [4, 12, 24]),
    "RECRAWL_BASKET_DEFAULT": ("12", 12),
    "RECRAWL_BASKET_MODEL": ("model.json", "model.json"),
    "RECRAWL_HOUR_SECONDS": ("1", 1),
    "RECRAWL_CHANGE_TEST": ("chi2", "chi2"),
    "RECRAWL_CHI2_P": ("0.01", 0.01),
    "RECRAWL_BOW_TERMS": ("128", 128),
    "RECRAWL_WINDOW": ("2", 2),
    "RECRAWL_EXPERTS": ("10", 10),
    "RECRAWL_EXPERTS_LAG": ("2", 2),
    "RECRAWL_EXPERTS_CANDIDATES": ("64", 64),
    "RECRAWL_EXPERTS_HISTORY": ("30", 30),
    "RECRAWL_EXPERTS_REFRESH": ("100", 100),
    "RECRAWL_EXPERTS_SAME_HOST": ("false", False),
    "RECRAWL_PLANNER": ("webfountain", "webfountain"),
    "RECRAWL_PLAN_STRATEGY": ("strategy2", "strategy2"),
    "RECRAWL_PLAN_PERIODS": ("7", 7),
    "RECRAWL_PLAN_EVERY": ("3", 3),
    "RECRAWL_BUCKETS": ("16", 16),
    "RECRAWL_EVIDENCE": ("true", True),
    "RECRAWL_IMPORTANCE": ("myproject.weights.of", "myproject.weights.of"),
    "RECRAWL_SITEMAP_CHECKS": ("5", 5),
    "RECRAWL_SITEMAP_TRUST": ("0.8", 0.8),
    "RECRAWL_REDIS_KEY": ("news", "news"),
    "RECRAWL_REDIS_LOG_MAXLEN": ("1000", 1000),
    "RECRAWL_REDIS_SHARDS": ("4", 4),
    "RECRAWL_REDIS_SCHEDULER_KEY": ("%(spider)s:rc", "%(spider)s:rc"),
    "RECRAWL_REDIS_LOCK_SECONDS": ("10", 10),
    "RECRAWL_REDIS_WORKER_TIMEOUT": ("5.5", 5.5),
    "RECRAWL_REDIS_OUTAGE_SECONDS": ("0", 0),
    "RECRAWL_REDIS_CLUSTER": ("true", True),
    "RECRAWL_ALLOW_PICKLE": ("true", True),
    "RECRAWL_ON_STORE_LOSS": ("continue", "continue"),
    "RECRAWL_PLUGINS_BASE": ('{"a.B": 100}', {"a.B": 100}),
    "RECRAWL_PLUGINS": ('{"my.Plugin": null}', {"my.Plugin": None}),
    "RECRAWL_SCORER": ("nad+", "nad+"),
    "RECRAWL_PRIOR": ("0.5,100", [0.5, 100]),
    "RECRAWL_SEED": ("7", 7),
    "RECRAWL_NUTCH_INTERVAL": ("45", 45),
    "RECRAWL_NUTCH_MIN_INTERVAL": ("0.5", 0.5),
    "RECRAWL_NUTCH_MAX_INTERVAL": ("730", 730),
    "RECRAWL_NUTCH_INC_RATE": ("0.3", 0.3),
    "RECRAWL_NUTCH_DEC_RATE": ("0.25", 0.25),
    "RECRAWL_BURST_TAU": ("3.5", 3.5),
}


def read(settings, name):
    value = get(settings, name)
    return parse_budget(value)[0] if name == "RECRAWL_BUDGET" else value


def test_every_setting_has_a_kind_and_a_row_here():
    assert set(KINDS) == set(DEFAULTS)
    assert set(FROM_THE_COMMAND_LINE) == set(DEFAULTS)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_a_command_line_string_reads_as_scrapys_getters_read_it(name):
    text, expected = FROM_THE_COMMAND_LINE[name]
    value = read(Settings({name: text}, priority="cmdline"), name)
    assert value == expected and type(value) is type(expected), (name, value)


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_the_default_reads_as_itself(name):
    value = read(Settings(), name)
    expected = DEFAULTS[name]
    assert value == (parse_budget(expected)[0] if name == "RECRAWL_BUDGET" else expected)


def test_the_start_up_check_takes_command_line_strings():
    settings = Settings(
        {
            "RECRAWL_CONTINUOUS": "true",
            "RECRAWL_MONITOR_SHARE": "0.1",
            "RECRAWL_IGNORE_XPATHS": '//footer,//div[contains(@class, "ad")]',
            "RECRAWL_BUDGET": "20",
            "RECRAWL_MAX_PER_DOMAIN": "10",
            "RECRAWL_PRIOR": "(0.5, 100)",
            "RECRAWL_SKIP_UNCHANGED": "all",
            "RECRAWL_PROBE_OFFSETS": "4,6,9",
            "RECRAWL_PLUGINS": '{"scrapy_recrawl.content.plugin.ContentPlugin": null}',
            "RECRAWL_SEED": "3",
        },
        priority="cmdline",
    )
    check_settings(settings)
    config = CycleConfig.from_settings(settings)
    assert config.continuous is True and config.monitor_share == 0.1 and config.budget == 20
    assert config.max_per_domain == 10 and config.seed == 3
    from scrapy_recrawl.change import ChangeDetector

    xpaths = ChangeDetector.from_settings(settings).ignore_xpaths
    assert xpaths == ("//footer", '//div[contains(@class, "ad")]')  # a comma inside [] stays
    assert skip_mode(settings) == "all"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("RECRAWL_CONTINUOUS", "yes", "RECRAWL_CONTINUOUS='yes': expected True or False"),
        ("RECRAWL_ENABLED", "off", "RECRAWL_ENABLED='off'"),
        ("RECRAWL_MONITOR_SHARE", "lots", "RECRAWL_MONITOR_SHARE='lots'"),
        ("RECRAWL_MONITOR_SHARE", "2", "RECRAWL_MONITOR_SHARE='2'"),
        ("RECRAWL_MAX_PER_DOMAIN", "ten", "RECRAWL_MAX_PER_DOMAIN='ten'"),
        ("RECRAWL_ADAPTIVE_BUDGET", "few", "RECRAWL_ADAPTIVE_BUDGET='few'"),
        ("RECRAWL_WARMUP_CYCLES", "1.5", "RECRAWL_WARMUP_CYCLES='1.5'"),
        ("RECRAWL_PLUGINS", "{not json", "RECRAWL_PLUGINS='{not json'"),
        ("RECRAWL_PLUGINS", "[1, 2]", "RECRAWL_PLUGINS='[1, 2]'"),
        ("RECRAWL_PROBE_OFFSETS", "a,b", "RECRAWL_PROBE_OFFSETS='a,b'"),
        ("RECRAWL_SKIP_UNCHANGED", "some", "RECRAWL_SKIP_UNCHANGED='some'"),
        ("RECRAWL_SKIP_UNCHANGED", "True", "say what to skip: 'items'"),
        ("RECRAWL_CHANGE_SIGNAL", "dom", "RECRAWL_CHANGE_SIGNAL='dom': expected 'text' or 'items'"),
        ("RECRAWL_ITEM_VALUES_MAX_BYTES", "-1", "RECRAWL_ITEM_VALUES_MAX_BYTES='-1'"),
        ("RECRAWL_BUDGET", "1.0", "write 1 for one page or '100%'"),
        ("RECRAWL_REDIS_OUTAGE_SECONDS", "soon", "RECRAWL_REDIS_OUTAGE_SECONDS='soon'"),
        ("RECRAWL_ON_STORE_LOSS", "ignore", "RECRAWL_ON_STORE_LOSS='ignore': expected 'stop' or"),
        # inf passes "> 0" and would score inf*0 = NaN: every number must be finite
        ("RECRAWL_BURST_TAU", "inf", "RECRAWL_BURST_TAU='inf': expected a finite number"),
        ("RECRAWL_NUTCH_INTERVAL", "inf", "RECRAWL_NUTCH_INTERVAL='inf': expected a finite"),
        ("RECRAWL_FLUSH_SECONDS", "-inf", "RECRAWL_FLUSH_SECONDS='-inf': expected a finite"),
        ("RECRAWL_BURST_TAU", "nan", "RECRAWL_BURST_TAU='nan': expected a finite number"),
    ],
)
def test_a_bad_string_is_refused_by_name(name, text, message):
    with pytest.raises(RecrawlSettingError) as err:
        check_settings(Settings({name: text}, priority="cmdline"))
    assert message in str(err.value)


def test_skip_all_with_the_items_signal_is_refused_naming_both():
    settings = Settings(
        {"RECRAWL_SKIP_UNCHANGED": "all", "RECRAWL_CHANGE_SIGNAL": "items"}, priority="cmdline"
    )
    with pytest.raises(RecrawlSettingError) as err:
        check_settings(settings)
    assert "RECRAWL_SKIP_UNCHANGED='all' with RECRAWL_CHANGE_SIGNAL='items'" in str(err.value)


def test_enabled_reads_like_getbool():
    assert enabled(Settings()) is True
    for off in (False, 0, "0", "False", "false"):
        assert enabled(Settings({"RECRAWL_ENABLED": off})) is False


# -- misspelled names -------------------------------------------------------------


def test_an_unknown_name_gets_the_closest_valid_one():
    messages = unknown_settings(
        ["RECRAWL_BUGDET", "RECRAWL_BUDGET", "DOWNLOAD_DELAY", "RECRAWL_XYZZY_QUUX"], DEFAULTS
    )
    assert len(messages) == 2
    assert "RECRAWL_BUGDET" in messages[0] and "did you mean RECRAWL_BUDGET?" in messages[0]
    assert "RECRAWL_XYZZY_QUUX" in messages[1] and "did you mean" not in messages[1]


def test_the_warning_comes_once_per_crawl(caplog):
    settings = Settings({"RECRAWL_BUGDET": "10"}, priority="cmdline")
    with caplog.at_level(logging.WARNING, logger="scrapy_recrawl"):
        for _ in range(3):  # the add-on, the middleware, the scheduler
            check_settings(settings)
    warned = [r.getMessage() for r in caplog.records if "RECRAWL_BUGDET" in r.getMessage()]
    assert len(warned) == 1 and "RECRAWL_BUDGET" in warned[0]


class PluginWithSettings:
    """A plug-in that reads a RECRAWL_* setting of its own (declared: not a typo)."""

    api_version = "1"
    capabilities: frozenset[str] = frozenset()
    terminals = ()
    setting_names = ("RECRAWL_SHORTEST_FIRST",)

    @classmethod
    def enabled(cls, settings, terminals_needed):
        return False

    @classmethod
    def check_settings(cls, settings):
        pass


def test_a_plugins_declared_settings_are_not_misspelled(caplog):
    settings = Settings(
        {
            "RECRAWL_PLUGINS": {f"{__name__}.PluginWithSettings": 500},
            "RECRAWL_SHORTEST_FIRST": True,
        }
    )
    with caplog.at_level(logging.WARNING, logger="scrapy_recrawl"):
        check_settings(settings)
    assert "RECRAWL_SHORTEST_FIRST" not in caplog.text


# -- the budget ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected", "deprecated"),
    [
        (100, 100, False),
        ("100", 100, False),
        ("5%", Share(0.05), False),
        (" 2.5% ", Share(0.025), False),
        ("100%", Share(1.0), False),
        (0.05, Share(0.05), True),
        ("0.05", Share(0.05), True),
    ],
)
def test_a_budget_is_pages_or_a_share(value, expected, deprecated):
    budget, note = parse_budget(value)
    assert budget == expected and type(budget) is type(expected)
    assert (note is not None) == deprecated
    if deprecated:
        assert "'5%'" in note


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.0, "write 1 for one page or '100%' for every known URL"),
        ("1.0", "write 1 for one page or '100%'"),
        (20.0, "write 20 for 20 pages"),
        (0, "at least 1 page"),
        (-5, "at least 1 page"),
        ("0%", "above 0%"),
        ("150%", "at most 100%"),
        ("lots", "a number of pages"),
        (True, "a number of pages"),
        (None, "a number of pages"),
    ],
)
def test_an_ambiguous_or_bad_budget_is_refused(value, message):
    with pytest.raises(RecrawlSettingError, match="RECRAWL_BUDGET") as err:
        parse_budget(value)
    assert message in str(err.value)


def test_one_page_and_every_page_differ():
    assert budget_pages(1, 40) == 1 and budget_pages("100%", 40) == 40
    assert budget_pages("5%", 50) == 3 == budget_pages(0.05, 50)  # a share rounds up


def test_a_deprecated_float_budget_is_warned_about_once(caplog):
    settings = Settings({"RECRAWL_BUDGET": 0.05})
    with caplog.at_level(logging.WARNING, logger="scrapy_recrawl"):
        check_settings(settings)
        check_settings(settings)
    assert caplog.text.count("deprecated") == 1 and "'5%'" in caplog.text
    assert CycleConfig.from_settings(settings).budget == Share(0.05)
