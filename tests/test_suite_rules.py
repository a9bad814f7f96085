"""The suite's own rules (tests/conftest.py, docs/testing.md "Suite time"): every test that
runs Spark lands in the one xdist group, and a test over the per-test time limit fails
unless it is marked to be allowed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A scratch test directory with the suite's conftest."""
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    spark: x\n    over_time_limit: x\n    timeout: x\n")
    return pytester


def test_spark_tests_are_grouped_by_fixture_parameter_or_mark(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import pytest

        @pytest.fixture
        def spark():  # stands in for the real session: no JVM here
            return None

        def test_fixture(spark): pass

        @pytest.mark.parametrize("engine", ["duckdb", "spark"])
        def test_engine(engine): pass

        @pytest.mark.spark
        def test_marked(): pass

        def test_plain(): pass

        @pytest.mark.spark
        @pytest.mark.timeout(1000)
        def test_marked_with_its_own_guard(): pass

        def test_zz_report(request):
            grouped = sorted(
                item.name for item in request.session.items
                if item.get_closest_marker("xdist_group") is not None
            )
            assert grouped == ["test_engine[spark]", "test_fixture", "test_marked",
                               "test_marked_with_its_own_guard"], grouped
            guards = {
                item.name: item.get_closest_marker("timeout").args[0]
                for item in request.session.items
                if item.get_closest_marker("timeout") is not None
            }
            assert guards == {"test_engine[spark]": 900, "test_fixture": 900,
                              "test_marked": 900, "test_marked_with_its_own_guard": 1000}
        """
    )
    suite.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=7)


def test_a_test_over_the_limit_fails_unless_marked(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPTOOLS_TEST_TIME_LIMIT_S", "0.05")
    monkeypatch.setenv("GPTOOLS_TEST_TIME_LIMIT", "enforce")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # a quiet machine
    suite.makepyfile(
        """
        import time
        import pytest

        def test_quick(): pass

        def test_slow(): time.sleep(0.2)  # the duration itself is what is checked

        @pytest.mark.over_time_limit("measured on purpose")
        def test_slow_and_allowed(): time.sleep(0.2)
        """
    )
    result = suite.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["took * s, over the suite's per-test limit of 0.05 s *", "FAILED *::test_slow - *"]
    )


def test_the_limit_grows_with_the_load_per_core(monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.conftest as rules

    cores = os.cpu_count() or 1
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0 * cores, 0.0, 0.0))
    assert rules.time_limit_s() == 3.0 * rules.TEST_TIME_LIMIT_S
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5 * cores, 0.0, 0.0))
    assert rules.time_limit_s() == rules.TEST_TIME_LIMIT_S


def test_a_test_over_the_limit_is_listed_when_not_enforced(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPTOOLS_TEST_TIME_LIMIT_S", "0.05")
    monkeypatch.setenv("GPTOOLS_TEST_TIME_LIMIT", "list")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    suite.makepyfile(
        """
        import time

        def test_quick(): pass

        def test_slow(): time.sleep(0.2)
        """
    )
    result = suite.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*1 tests over the per-test limit of 0.05 s*", "*s  *::test_slow"])
