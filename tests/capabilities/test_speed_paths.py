"""The capability-env speed paths change nothing: each shortcut against the general code, and
pinned episodes of every capability env.

* draws: ``synthdb._draw.sample`` is ``random.Random.sample``, the generators' uuid is
  ``uuid.UUID(int=..., version=4)``, and the ToolSandbox worlds are the ones drawn before;
* the τ²-bench generators write the benchmark's canonical form (the engine takes them as they are);
* ``where_filter`` keeps exactly the records ``where_matches`` keeps;
* the E.164 shortcut of ``canonical_phone`` and of ToolSandbox's phone check agree with phonenumbers;
* the ToolSandbox backend: a failed call changes nothing, forks and episodes never see each
  other's writes, the starting state stays put, the no-copy view equals the copy;
* pinned episodes: the digests were computed with the code as it was before the capability-env
  speed-ups; recompute them (``python -m tests.capabilities.test_speed_paths``) only when a
  spec, the data or the engine's outputs change on purpose, and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import random
import uuid

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trace_gym  # noqa: F401  (registers the ids)
from trace_gym.capabilities.canonical import canonical_phone
from trace_gym.capabilities.matchers import where_filter, where_getters, where_matches
from trace_gym.capabilities.synthdb import GENERATORS
from trace_gym.capabilities.synthdb._draw import sample
from trace_gym.capabilities.synthdb.toolsandbox import _uuid, generate_toolsandbox_world

CAP_IDS = sorted(i for i in gym.registry if i.startswith("trace/cap-"))
TAU2_CAP_IDS = [i for i in CAP_IDS if not i.startswith("trace/cap-ts-")]
TS_CAP_IDS = [i for i in CAP_IDS if i.startswith("trace/cap-ts-")]


def _digest(x) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, ensure_ascii=False, default=repr).encode()).hexdigest()[:16]


# ------------------------------------------------------------------ draws

@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 120), data=st.data())
def test_sample_draws_what_random_sample_draws(seed, n, data):
    k = data.draw(st.integers(0, n))
    population = list(range(n))
    a, b = random.Random(seed), random.Random(seed)
    assert sample(a, population, k) == b.sample(population, k)
    assert a.random() == b.random()  # the same numbers were taken from the generator
    with pytest.raises(ValueError):
        sample(a, population, n + 1)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32))
def test_the_world_uuid_is_a_version_4_uuid_of_the_same_bits(seed):
    a, b = random.Random(seed), random.Random(seed)
    assert _uuid(a) == str(uuid.UUID(int=b.getrandbits(128), version=4))


# (sizes) -> digest of the worlds of seeds 0..19 and of the generator's next draw, drawn before the speed-ups
PINNED_WORLDS = [
    ({}, "df9a38bae51a34f154450244bfbd192b5a75a138a39ae2ce66400488871501f2"),
    ({"contacts": 20, "messages": 30, "reminders": 15, "similar_names": 6, "cellular_off": 50, "wifi_off": 50,
      "location_off": 50, "low_battery": 30}, "fd76a9983c6680176290057f1a5d9f2861f74007ebb2c58f1cafe908fe104d08"),
    ({"contacts": 2, "messages": 0, "reminders": 0, "similar_names": 10, "low_battery": 100},
     "bcf4354017c3523d7c21ef1d5469347b0e917625b9463712ea4d6340e4528667"),
    ({"contacts": 40, "messages": 80, "reminders": 40, "similar_names": 10},
     "77f5ed3c8eedbb3b80a957368c7cb4a1a85940541674da0292a54728fb5c86a7"),
]


@pytest.mark.parametrize("sizes, expected", PINNED_WORLDS, ids=lambda v: str(v)[:40])
def test_toolsandbox_worlds_are_unchanged(sizes, expected):
    h = hashlib.sha256()
    for s in range(20):
        rng = random.Random(s)
        world = generate_toolsandbox_world(rng, **sizes)
        world.pop("holidays")  # computed from the clock, after the pin (no draws): every drawn table is pinned
        h.update(json.dumps(world).encode())
        h.update(repr(rng.random()).encode())
    assert h.hexdigest() == expected


# ------------------------------------------------------------------ canonical databases

_SIZES = {
    "retail": st.fixed_dictionaries({"users": st.integers(1, 8), "extra_orders": st.integers(0, 8),
                                     "products": st.integers(2, 8), "variants": st.integers(3, 9)}),
    "airline": st.fixed_dictionaries({"users": st.integers(1, 8), "extra_reservations": st.integers(0, 8),
                                      "routes": st.integers(1, 4)}),
}


@pytest.mark.parametrize("domain", sorted(_SIZES))
def test_generated_databases_are_in_the_benchmark_canonical_form(tau2_data, domain):
    from trace_gym.tau2.domain_spec import load_domain

    normalise = load_domain(domain).spec.normalise_db

    @settings(max_examples=25, deadline=None)
    @given(seed=st.integers(0, 2**32), sizes=_SIZES[domain])
    def check(seed, sizes):
        db = GENERATORS[domain](random.Random(seed), **sizes)
        assert json.dumps(normalise(db)) == json.dumps(db)  # same keys, same order, same values

    check()


# telecom's initial_db() is the keyed view its rewards read (agent tables by id, the phone); the database its
# engine starts from is checked canonical in tests/capabilities/test_telecom_specs.py
@pytest.mark.parametrize("env_id", [i for i in TAU2_CAP_IDS if not i.startswith("trace/cap-telecom-")])
def test_episode_databases_stay_canonical_with_their_distractors(tau2_data, env_id):
    from trace_gym.tau2.domain_spec import load_domain

    env = gym.make(env_id).unwrapped
    normalise = load_domain(env.cap_spec.domain).spec.normalise_db
    for seed in range(6):
        env.reset(seed=seed)
        db = env._backend.initial_db()
        assert json.dumps(normalise(db)) == json.dumps(db)


# ------------------------------------------------------------------ where filters

_KEYS = ["a", "b", "c", "n.x", "n.0", "."]
_SCALARS = st.one_of(st.sampled_from(["u", "v", "w"]), st.integers(0, 2), st.booleans(), st.none())
_RECORD = st.one_of(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), _SCALARS, max_size=3).map(
        lambda d: {**d, "n": {"x": d.get("a")}} if d.get("c") == "u" else d),
    st.lists(_SCALARS, max_size=2),
    _SCALARS,
)
_MATCHER = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=2),
                     st.fixed_dictionaries({"in": st.lists(_SCALARS, max_size=3)}),
                     st.fixed_dictionaries({"ne": _SCALARS}), st.fixed_dictionaries({"exists": st.booleans()}))


_TRICKY_RECORDS = [{}, {"a": None}, {"a": "u", "b": None}, {"b": 0}, {"a": False, "b": 0}, {"a": 0}, {"a": 1, "b": True},
                   ["u"], None, "u", {"a": ["u"]}, {"n": {"x": None}}]


@settings(max_examples=300, deadline=None)
@given(records=st.lists(_RECORD, max_size=8), where=st.dictionaries(st.sampled_from(_KEYS), _MATCHER, max_size=3))
def test_where_filter_keeps_what_where_matches_keeps(records, where):
    records = records + _TRICKY_RECORDS  # missing fields, None, False/0 and 1/True, records that are not mappings
    getters = where_getters(list(where))
    assert where_filter(records, getters, list(where.values())) == [r for r in records if where_matches(r, where)]


@pytest.mark.parametrize("where", [{"a": None}, {"a": None, "b": None}, {"a": None, "b": 0, "c": None}, {"a": 0},
                                   {"a": False, "b": 0}, {"a": ["u"]}, {"b": True}, {"a": "u", "b": None}, {}])
def test_where_filter_on_missing_fields_and_lookalike_values(where):
    getters = where_getters(list(where))
    assert where_filter(_TRICKY_RECORDS, getters, list(where.values())) == [r for r in _TRICKY_RECORDS if where_matches(r, where)]


# ------------------------------------------------------------------ phone numbers

_NANP = st.builds(lambda first, rest: f"+1{first}{rest}", st.integers(2, 9), st.text("0123456789", min_size=9, max_size=9))


@settings(max_examples=300, deadline=None)
@given(_NANP)
def test_the_e164_shortcuts_agree_with_phonenumbers(number):
    import phonenumbers

    from trace_gym.toolsandbox.tools.common import check_phone

    parsed = phonenumbers.parse(number, None)  # parses: the tool's check has nothing to say
    assert canonical_phone(number) == phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)
    assert check_phone(number) is None


def test_phone_forms_off_the_shortcut_still_parse_or_fail_as_before():
    from trace_gym.toolsandbox.tools.common import check_phone

    assert canonical_phone("(415) 555-0134") == "+14155550134" == canonical_phone(" +1 415 555 0134 ")
    assert canonical_phone("not a number") is None and canonical_phone(41555) is None
    assert check_phone("+44 20 7946 0958") is None
    for _ in range(2):  # a failing text fails every time (failures are not remembered as successes)
        with pytest.raises(Exception, match="(?i)not a number|invalid|country"):
            check_phone("1234")


# ------------------------------------------------------------------ the ToolSandbox backend

@pytest.fixture
def ts_env(toolsandbox_data):
    return gym.make("trace/cap-ts-state-dependency-v0").unwrapped


def test_a_failed_call_leaves_the_world_exactly_as_it_was(ts_env):
    ts_env.reset(seed=1)
    backend = ts_env._backend
    backend.call("set_wifi_status", {"on": False})
    before, fingerprint = backend.world.snapshots(), backend.fingerprint()
    for name, args in [("remove_contact", {"person_id": "nobody"}), ("add_contact", {"name": 3}),
                       ("send_message_with_phone_number", {"phone_number": "1234", "content": "x"}),
                       ("no_such_tool", {}), ("set_wifi_status", {"unexpected": 1})]:
        res = backend.call(name, args)
        assert res.error, (name, res.content)
        assert backend.world.snapshots() == before and backend.fingerprint() == fingerprint


def test_forks_and_episodes_never_see_each_others_writes(ts_env):
    ts_env.reset(seed=2)
    backend = ts_env._backend
    start = json.dumps(backend.current_db(), sort_keys=True)
    fork = backend.fork()
    assert fork.call("set_wifi_status", {"on": False}).error is False
    added = fork.call("add_reminder", {"content": "x", "reminder_timestamp": 2e9})
    assert added.error is False
    assert json.dumps(backend.current_db(), sort_keys=True) == start
    assert backend.call("add_reminder", {"content": "x", "reminder_timestamp": 2e9}).content == added.content  # ids count per backend
    assert json.dumps(backend.initial_db(), sort_keys=True) == start == json.dumps(fork.initial_db(), sort_keys=True)
    assert backend.state_view() == backend.current_db() and backend.state_view() != fork.state_view()
    assert backend.fingerprint() == hashlib.sha256(json.dumps(backend.current_db(), sort_keys=True, default=repr)
                                                   .encode()).hexdigest()


# ------------------------------------------------------------------ pinned episodes

def _bad_calls(env) -> list[str]:
    names = env.tools.names[:3]
    out = [json.dumps({"name": n, "arguments": {"unexpected": 1}}) for n in names]
    out += [json.dumps({"name": n, "arguments": {k: 12345 for k in (env.tools[n].parameters.get("properties") or {})}})
            for n in names]
    return out + [json.dumps({"name": "no_such_tool", "arguments": {}})]


def episode_digests(env_id: str, seeds=range(4)) -> list[str]:
    """Per seed: reset, failing calls, the reference's reads, a probe write, then the reference, with the
    state after every step and both databases at the end."""
    env = gym.make(env_id, max_steps=60).unwrapped
    out = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        trace = [obs, info, env._backend.initial_db()]
        probes = env.unauthorized_actions()[:1]
        for a in _bad_calls(env) + env.read_only_actions() + probes + env.reference_actions():
            o, r, term, trunc, inf = env.step(a)
            trace.append([o, r, term, trunc, inf, env.state_fingerprint()])
            if term or trunc:
                break
        trace += [env.transcript(), env._backend.current_db(), env._backend.initial_db()]
        out.append(_digest(trace))
    return out


# Repinned when an env's info changes shape (the ToolSandbox specs' withheld_weight knob now shows in
# info['difficulty']); the episodes themselves were checked equal with that key left out.
PINNED_EPISODES = {
    'trace/cap-flight-selection-v0': ['36e30fca047f00c4', 'eb0491080234231a', '9fdab6f65769d26a', '05cd235fad06c9de'],
    'trace/cap-multi-step-completion-v0': ['a469ed21faa810d4', '4d09f1f86bcbe295', '65d919eadf0f23b2', 'f87442dd35d285d9'],
    'trace/cap-precondition-verification-v0': ['600045f774c04472', 'ebcacd8ff5b7ed4c', '6cfe1423fef36d21', 'ec22de2e889588a3'],
    'trace/cap-refund-policy-v0': ['f123dd3022be4994', '334c5e34ced27a96', '337536e4c7ccb1b7', '48286b942fdfce71'],
    'trace/cap-structured-selection-v0': ['a195deae8c6d5c12', '69d7b6fe35324185', 'ab3640c4b307905b', 'aa3ba2a227a1768c'],
    'trace/cap-tool-call-precision-v0': ['81522238af784682', '776c69d6b1dec867', '0dc090267659c2fa', 'd59af6490c8fcb31'],
    'trace/cap-ts-canonicalization-v0': ['b3e76b5b74e475c6', 'fbf62bdd1c8f27fd', '3886c37885996d84', 'd1a93240718994b3'],
    'trace/cap-ts-insufficient-information-v0': ['a5cb2f289481abb1', '27c2a267e4999e18', 'c9d14049a2d5e58d', '52c91970d2b1c08d'],
    'trace/cap-ts-location-dependency-v0': ['04485c36877404dc', 'bf5c7a4d0b9634f0', '32b5cdff114de599', 'd5252019c2c5ec6a'],
    'trace/cap-ts-multiple-tool-call-v0': ['15f5b5d68338b54d', '0976b0043374bee8', '27c0cc3455cb9148', '516a1369ffbee331'],
    'trace/cap-ts-multiple-user-turn-v0': ['bd90962eb4bf1f6b', '37b43d72295b023b', '9b24fdd5bda08bf1', '27e12cb7e02fa50f'],
    'trace/cap-ts-state-dependency-v0': ['3882963330f26cb8', 'cbe48e0b9e0a0ab7', '5bd1d5911f3cdb72', '338cdf255ea6c89f'],
}


@pytest.mark.parametrize("env_id", sorted(PINNED_EPISODES))
def test_capability_episodes_are_unchanged(request, env_id):
    request.getfixturevalue("toolsandbox_data" if env_id.startswith("trace/cap-ts-") else "tau2_data")
    assert episode_digests(env_id) == PINNED_EPISODES[env_id]


if __name__ == "__main__":
    for i in sorted(PINNED_EPISODES):
        print(f"    {i!r}: {episode_digests(i)!r},")
