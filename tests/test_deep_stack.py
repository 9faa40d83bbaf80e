"""Linting runs in a thread with a large stack and a raised recursion limit
(`cslint.deep_stack`); deep input through the command line is in test_cli.py."""

from __future__ import annotations

import sys
import threading

import pytest

from cslint.deep_stack import RECURSION_LIMIT, with_deep_stack


@with_deep_stack
def where_it_runs() -> tuple[str, int]:
    return threading.current_thread().name, sys.getrecursionlimit()


@with_deep_stack
def nested() -> tuple[str, tuple[str, int]]:
    return threading.current_thread().name, where_it_runs()


def test_the_call_runs_in_its_thread_under_the_raised_limit_which_is_then_restored():
    before = sys.getrecursionlimit()
    name, limit = where_it_runs()
    assert name == "cslint-deep-stack" and name != threading.current_thread().name
    assert limit == RECURSION_LIMIT
    assert sys.getrecursionlimit() == before


def test_a_call_from_the_deep_thread_runs_in_it():
    outer, (inner, _) = nested()
    assert outer == inner == "cslint-deep-stack"


def test_the_exception_reaches_the_caller():
    error = ValueError("boom")

    @with_deep_stack
    def failing():
        raise error

    with pytest.raises(ValueError) as raised:
        failing()
    assert raised.value is error


def test_recursion_goes_deep_in_the_thread():
    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    assert with_deep_stack(depth)(RECURSION_LIMIT - 1_000) == RECURSION_LIMIT - 1_000


def test_where_the_platform_refuses_the_stack_the_call_runs_as_it_is(monkeypatch):
    def refuse(size=None):
        if size:
            raise ValueError("size not valid")
        return 0

    monkeypatch.setattr(threading, "stack_size", refuse)
    before = sys.getrecursionlimit()
    assert where_it_runs() == (threading.current_thread().name, before)
