"""A small bookshop: a tool environment written for the bring-your-own-domain example.

The state is a dict of three tables — ``books``, ``customers`` and ``orders``, each keyed by
id — drawn by :func:`generate` from a seeded ``random.Random``.  Five read tools look things
up; two write tools place and cancel orders.  The shop's policy (the system prompt) says an
order may be cancelled only while it is ``placed`` (not once ``shipped``) and that every
change needs the customer's explicit yes.

Register it without touching trace-gym::

    export PYTHONPATH=examples/byo_domain
    export TRACE_GYM_DOMAINS=bookshop=bookshop_domain:make_domain
    export TRACE_GYM_ENVS_DIR=examples/byo_domain/specs

or, from an installed package, with an entry point in the ``trace_gym.domains`` group.
"""

from __future__ import annotations

import random
from typing import Any

from trace_gym.analysis.labels import Capability
from trace_gym.capabilities.dict_domain import DictDomain, DomainTool
from trace_gym.core.tools import ToolError

__all__ = ["make_domain", "generate", "POLICY", "TOOLS"]

POLICY = """You are the assistant of Folio & Quire, a small bookshop. You help customers order books and manage their orders.

# Policy
- Identify the customer first: find their customer id from their email with find_customer_by_email.
- Before any change (placing or cancelling an order), say exactly what you will do and ask the customer to confirm. Act only after an explicit "yes".
- An order can be cancelled only while its status is "placed". A "shipped" order can no longer be cancelled: tell the customer so and change nothing.
- Only order books that are in stock. Do not change anything the customer did not ask for.
- Make one tool call at a time. When everything is done, ask whether there is anything else."""

_FIRST = ["Ada", "Bruno", "Chiara", "Dmitri", "Elif", "Farah", "Goran", "Hana", "Ines", "Jonas", "Keiko", "Luis"]
_LAST = ["Moreau", "Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Sato", "Tanaka", "Urban", "Varga", "Weber", "Yilmaz"]
_ADJ = ["Silent", "Crimson", "Hidden", "Northern", "Paper", "Glass", "Winter", "Last", "Golden", "Restless", "Quiet", "Salt"]
_NOUN = ["Harbor", "Garden", "Lighthouse", "Atlas", "Orchard", "River", "Cartographer", "Library", "Comet", "Island"]
_GENRES = ["mystery", "science fiction", "history", "poetry", "travel", "cooking"]


def generate(rng: random.Random, *, books: int = 8, customers: int = 3, orders_per_customer: int = 2) -> dict[str, Any]:
    """A bookshop world drawn from ``rng`` only (one seed, one world)."""
    titles = rng.sample([f"The {a} {n}" for a in _ADJ for n in _NOUN], books)
    shelf = {}
    for i, title in enumerate(titles):
        bid = f"B{100 + i}"
        shelf[bid] = {"book_id": bid, "title": title, "author": f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
                      "genre": rng.choice(_GENRES), "price": rng.randrange(8, 40) + 0.99, "stock": rng.randrange(1, 6)}
    people = rng.sample([(f, ln) for f in _FIRST for ln in _LAST], customers)
    folks, orders = {}, {}
    for i, (first, last) in enumerate(people):
        cid = f"C{200 + i}"
        folks[cid] = {"customer_id": cid, "name": f"{first} {last}", "email": f"{first.lower()}.{last.lower()}@example.com",
                      "orders": []}
        for j in range(orders_per_customer):
            oid = f"O{3000 + len(orders)}"
            items = sorted(rng.sample(sorted(shelf), rng.randrange(1, 3)))
            # the first order of every customer is still placed, the second one shipped: every case can bind
            status = "placed" if j % 2 == 0 else "shipped"
            orders[oid] = {"order_id": oid, "customer_id": cid, "book_ids": items, "status": status,
                           "total": round(sum(shelf[b]["price"] for b in items), 2)}
            folks[cid]["orders"].append(oid)
    return {"books": shelf, "customers": folks, "orders": orders}


# ----------------------------------------------------------------------------------------------- tools
def _customer(db: dict[str, Any], customer_id: str) -> dict[str, Any]:
    if customer_id not in db["customers"]:
        raise ToolError(f"customer {customer_id} not found")
    return db["customers"][customer_id]


def _order(db: dict[str, Any], order_id: str) -> dict[str, Any]:
    if order_id not in db["orders"]:
        raise ToolError(f"order {order_id} not found")
    return db["orders"][order_id]


def find_customer_by_email(db: dict[str, Any], email: str) -> str:
    for c in db["customers"].values():
        if c["email"] == email.strip().lower():
            return c["customer_id"]
    raise ToolError(f"no customer with email {email}")


def get_customer(db: dict[str, Any], customer_id: str) -> dict[str, Any]:
    return _customer(db, customer_id)


def get_order(db: dict[str, Any], order_id: str) -> dict[str, Any]:
    return _order(db, order_id)


def search_books(db: dict[str, Any], query: str) -> list[dict[str, Any]]:
    q = query.strip().lower()
    return [{"book_id": b["book_id"], "title": b["title"], "author": b["author"], "price": b["price"], "stock": b["stock"]}
            for b in db["books"].values() if q in b["title"].lower() or q in b["author"].lower()]


def get_book(db: dict[str, Any], book_id: str) -> dict[str, Any]:
    if book_id not in db["books"]:
        raise ToolError(f"book {book_id} not found")
    return db["books"][book_id]


def place_order(db: dict[str, Any], customer_id: str, book_ids: list[str]) -> dict[str, Any]:
    customer = _customer(db, customer_id)
    if not book_ids or len(set(book_ids)) != len(book_ids):
        raise ToolError("book_ids must list each book once, at least one")
    for bid in book_ids:
        book = db["books"].get(bid)
        if book is None:
            raise ToolError(f"book {bid} not found")
        if book["stock"] < 1:
            raise ToolError(f"book {bid} is out of stock")
    for bid in book_ids:
        db["books"][bid]["stock"] -= 1
    oid = f"O{3000 + len(db['orders'])}"
    order = {"order_id": oid, "customer_id": customer_id, "book_ids": sorted(book_ids), "status": "placed",
             "total": round(sum(db["books"][b]["price"] for b in book_ids), 2)}
    db["orders"][oid] = order
    customer["orders"].append(oid)
    return order


def cancel_order(db: dict[str, Any], order_id: str) -> dict[str, Any]:
    order = _order(db, order_id)
    if order["status"] == "cancelled":
        raise ToolError(f"order {order_id} is already cancelled")
    # the warehouse can still recall a shipped parcel: the policy, not the tool, says not to
    order["status"] = "cancelled"
    for bid in order["book_ids"]:
        db["books"][bid]["stock"] += 1
    return order


def _obj(**props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


_S = {"type": "string"}
TOOLS = [
    DomainTool("find_customer_by_email", "Find a customer's id from their email address.", _obj(email=_S), find_customer_by_email),
    DomainTool("get_customer", "Get a customer's details, including their order ids.", _obj(customer_id=_S), get_customer),
    DomainTool("get_order", "Get an order's details: books, status and total.", _obj(order_id=_S), get_order),
    DomainTool("search_books", "Search the catalogue by words of the title or the author's name.", _obj(query=_S), search_books),
    DomainTool("get_book", "Get a book's details: title, author, price and stock.", _obj(book_id=_S), get_book),
    DomainTool("place_order", "Place an order for a customer. Each book id once.",
               _obj(customer_id=_S, book_ids={"type": "array", "items": _S, "minItems": 1}), place_order, kind="write"),
    DomainTool("cancel_order", "Cancel an order by id.", _obj(order_id=_S), cancel_order, kind="write"),
]

CAPABILITIES = [
    Capability("multi-step-completion", "Carry out every change a request needs (a new order and a cancellation), "
               "not just the first one.", starter_env="cap-shop-order-and-cancel"),
    Capability("precondition-verification", "Check an order's status before cancelling it and refuse, changing "
               "nothing, when the policy does not allow the cancellation.", starter_env="cap-shop-cancel-policy"),
]


def make_domain() -> DictDomain:
    """The ``bookshop`` capability domain (the factory ``TRACE_GYM_DOMAINS`` names)."""
    return DictDomain("bookshop", TOOLS, generate, POLICY, tables=("books", "customers", "orders"),
                      capabilities=CAPABILITIES)
