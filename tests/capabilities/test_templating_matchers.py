"""Placeholders and matchers: the only 'language' inside specs (lookups and fixed operators)."""

from __future__ import annotations

import pytest

from trace_gym.capabilities.matchers import matches, where_matches
from trace_gym.capabilities.templating import TemplateError, placeholders, render

CTX = {"order": {"order_id": "#W1", "items": [{"item_id": "11", "price": 5.5}, {"item_id": "22", "price": 4.25}],
                 "options": {"color": "red", "size": "M"}}, "n": 3}


def test_whole_placeholder_keeps_type_and_text_is_formatted():
    assert render("{order.items}", CTX) == CTX["order"]["items"]
    assert render("{n}", CTX) == 3
    assert render("Order {order.order_id} has {order.items|len} items", CTX) == "Order #W1 has 2 items"
    assert render(["{order.items.1.item_id}", {"k": "{order.order_id}"}], CTX) == ["22", {"k": "#W1"}]
    assert render("{{literal}} {n}", CTX) == "{literal} 3"


@pytest.mark.parametrize(
    "expr, value",
    [
        ("{order.items|map:item_id}", ["11", "22"]),
        ("{order.items|sum:price}", 9.75),
        ("{order.items.0.price|money}", "5.50"),
        ("{order.options|pairs}", "color: red, size: M"),
        ("{order.options|keys|sorted}", ["color", "size"]),
        ("{order.options|values|join}", "red, M"),
        ("{order.order_id|lower}", "#w1"),
        ("{order.items|last}", {"item_id": "22", "price": 4.25}),
    ],
)
def test_filters(expr, value):
    assert render(expr, CTX) == value


def test_missing_paths_and_bad_filters_raise_template_errors():
    with pytest.raises(TemplateError, match="missing 'nope'"):
        render("{order.nope}", CTX)
    with pytest.raises(TemplateError, match="unknown filter"):
        render("{order|explode}", CTX)
    with pytest.raises(TemplateError, match="cannot apply"):
        render("{n|first}", CTX)
    assert placeholders({"a": ["x {b.c|len} {d}"]}) == ["b.c|len", "d"]


@pytest.mark.parametrize(
    "value, matcher, ok",
    [
        ("delivered", "delivered", True),
        ("pending", {"in": ["pending", "processed"]}, True),
        ("cancelled", {"not_in": ["cancelled"]}, False),
        (5, {"gt": 3, "le": 5}, True),
        ("2024-05-20", {"gt": "2024-05-15"}, True),
        ("gift_card_1", {"startswith": "gift_card"}, True),
        (["b", "a", "a"], {"set_eq": ["a", "b", "a"]}, True),
        (["a", "b"], {"set_eq": ["a", "b", "b"]}, False),
        ([1, 2], {"len": {"ge": 2}}, True),
        ("$1,380.79", {"approx": 1380.79}, True),
        ("Hello World", {"icontains": "world"}, True),
        (3, {"gt": "x"}, False),  # incomparable types never match, never raise
        (None, None, True),
    ],
)
def test_matchers(value, matcher, ok):
    assert matches(value, matcher) is ok


def test_where_with_paths_quantifiers_and_missing_fields():
    rec = {"status": "delivered", "flights": [{"date": "2024-05-20"}, {"date": "2024-05-22"}], "pay": [{"id": "gift_card_1"}]}
    assert where_matches(rec, {"status": "delivered", "pay.0.id": {"startswith": "gift"}})
    assert where_matches(rec, {"flights": {"all": {"date": {"gt": "2024-05-15"}}}})
    assert not where_matches(rec, {"flights": {"any": {"date": {"lt": "2024-05-15"}}}})
    assert where_matches(rec, {"cancel_reason": {"exists": False}})
    assert not where_matches(rec, {"cancel_reason": "x"})
