"""Name, street and city pools shared by the synthetic databases."""

FIRST_NAMES = [
    "Ava", "Noah", "Mia", "Liam", "Sofia", "Ethan", "Yara", "Omar", "Lena", "Raj", "Chen", "Fatima",
    "Lucas", "Amelia", "Ivan", "Mei", "Daniel", "Aisha", "Mateo", "Harper", "Yusuf", "Emma", "Kenji", "Olivia",
]
LAST_NAMES = [
    "Moore", "Brown", "Li", "Garcia", "Kim", "Patel", "Nguyen", "Santos", "Ahmed", "Muller", "Rossi", "Khan",
    "Silva", "Cohen", "Wilson", "Lopez", "Ito", "Hansen", "Novak", "Davis", "Clark", "Lee",
]
STREETS = ["Maple Avenue", "Cedar Street", "Sunset Drive", "River Road", "Hillcrest Drive", "Oak Street", "Park Avenue", "Elm Street"]
CITIES = [
    ("Denver", "CO", "802"), ("Austin", "TX", "787"), ("Seattle", "WA", "981"), ("Chicago", "IL", "606"),
    ("Boston", "MA", "021"), ("Phoenix", "AZ", "850"), ("New York", "NY", "100"), ("Columbus", "OH", "432"),
]


def pick_names(rng, n: int) -> list[tuple[str, str]]:
    """``n`` distinct (first, last) name pairs."""
    out: list[tuple[str, str]] = []
    r = rng.random
    while len(out) < n:
        pair = (FIRST_NAMES[int(r() * len(FIRST_NAMES))], LAST_NAMES[int(r() * len(LAST_NAMES))])
        if pair not in out:
            out.append(pair)
    return out
