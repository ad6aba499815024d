"""bundle create chooses packages as apt on the node would: one version per package, the newest in dpkg's order
(numbers, epochs, tildes, revisions), and only one that every Depends / Pre-Depends relation on it allows."""

from __future__ import annotations

import pytest

from hgxkit.bundle import aptbundle
from hgxkit.errors import HgxkitError


def stanza(name: str, version: str, depends: str = "", pre: str = "") -> str:
    lines = [f"Package: {name}", f"Version: {version}", f"Filename: ./{name}_{version}.deb", "SHA256: 00", "Size: 1"]
    lines += [f"Depends: {depends}"] if depends else []
    lines += [f"Pre-Depends: {pre}"] if pre else []
    return "\n".join(lines)


def chosen(stanzas: list[str], wanted: dict[str, str]) -> dict[str, str]:
    picked = aptbundle.select(aptbundle.parse_packages("\n\n".join(stanzas) + "\n"), wanted)
    assert len({d.name for d in picked}) == len(picked), "one version per package"
    return {d.name: d.version for d in picked}


# (older, newer) in dpkg's order, where a comparison of strings gets at least one of them wrong.
ORDER = [
    ("1.9.0-1", "1.10.0-1"),  # numbers, not characters
    ("2.0-1", "1:0.9-1"),  # an epoch outranks everything after it
    ("1:4.4.1-1", "2:0.1-1"),
    ("1.0~rc1-1", "1.0-1"),  # a tilde sorts before anything, even the end
    ("1.0~rc1", "1.0~rc2"),
    ("1.0-9", "1.0-10"),  # revisions are numbers too
    ("580.95.05-1", "580.105.08-1"),
    ("1.0", "1.0+b1"),
]


@pytest.mark.parametrize(("older", "newer"), ORDER)
@pytest.mark.parametrize("listed", ["older first", "newer first"])
def test_an_unpinned_dependency_is_the_newest_in_dpkgs_order(older: str, newer: str, listed: str) -> None:
    versions = [older, newer] if listed == "older first" else [newer, older]
    repo = [stanza("app", "7-1", depends="lib"), *(stanza("lib", v) for v in versions)]
    assert chosen(repo, {"app": "7-*"}) == {"app": "7-1", "lib": newer}


@pytest.mark.parametrize(("older", "newer"), ORDER)
def test_a_pinned_glob_carries_its_newest_match_only(older: str, newer: str) -> None:
    assert chosen([stanza("app", older), stanza("app", newer)], {"app": "*"}) == {"app": newer}


LIBS = ["1.5-1", "1.9-1", "1.10-1", "2.0~rc1-1", "2.0-1", "1:0.1-1"]


@pytest.mark.parametrize(
    ("relation", "expected"),
    [
        ("lib (<< 2.0)", "2.0~rc1-1"),
        ("lib (<< 1.10)", "1.9-1"),
        ("lib (<= 1.10-1)", "1.10-1"),
        ("lib (= 1.9-1)", "1.9-1"),
        ("lib (>= 1.10)", "1:0.1-1"),
        ("lib (>> 1.5-1), lib (<< 1.10)", "1.9-1"),  # two clauses on one package: both hold
        ("lib (>= 1.9), lib (<< 2.0-1)", "2.0~rc1-1"),
        ("lib:any (< 1.9-1)", "1.9-1"),  # the obsolete `<` is `<=`; an architecture qualifier names the package
        ("missing (>= 1) | lib (<< 1.6)", "1.5-1"),  # the first alternative the repository can satisfy
        ("lib (>= 9:0) | lib (= 1.5-1)", "1.5-1"),
    ],
)
@pytest.mark.parametrize("field", ["Depends", "Pre-Depends"])
def test_a_dependency_satisfies_every_versioned_relation_on_it(relation: str, expected: str, field: str) -> None:
    app = stanza("app", "1-1", depends=relation) if field == "Depends" else stanza("app", "1-1", pre=relation)
    assert chosen([app, *(stanza("lib", v) for v in LIBS)], {"app": "1-*"})["lib"] == expected


def test_relations_from_several_packages_on_one_dependency_all_hold() -> None:
    repo = [
        stanza("app", "1-1", depends="left, right"),
        stanza("left", "1-1", depends="lib (>= 1.9)"),
        stanza("right", "1-1", depends="lib (<< 2.0)"),
        *(stanza("lib", v) for v in LIBS),
    ]
    assert chosen(repo, {"app": "*"}) == {"app": "1-1", "left": "1-1", "right": "1-1", "lib": "2.0~rc1-1"}


def test_a_relation_found_later_changes_a_choice_made_earlier() -> None:
    # lib is pinned loosely by a knob ("*": its newest), and the toolkit needs an older one: apt on the node would
    # install the older lib, so the bundle must carry that one (and no other).
    repo = [stanza("toolkit", "1.18.0-1", depends="mid"), stanza("mid", "1-1", depends="lib (<< 2.0)")]
    repo += [stanza("lib", v) for v in LIBS]
    assert chosen(repo, {"toolkit": "1.18.0-1", "lib": "*"}) == {
        "toolkit": "1.18.0-1",
        "mid": "1-1",
        "lib": "2.0~rc1-1",
    }


def test_a_chain_of_exact_relations_is_followed() -> None:
    repo = []
    for v in ("580.95.05-1", "580.105.08-1", "590.1-1"):
        repo += [
            stanza("nvidia-open", v, depends=f"nvidia-driver-cuda (= {v})"),
            stanza("nvidia-driver-cuda", v, depends=f"nvidia-smi (= {v}), libcuda1 (>= {v})"),
            stanza("nvidia-smi", v, pre=f"libnvidia-ml1 (= {v})"),
            stanza("libnvidia-ml1", v),
            stanza("libcuda1", v),
        ]
    got = chosen(repo, {"nvidia-open": "580.105.08-*"})
    assert got == {
        "nvidia-open": "580.105.08-1",
        "nvidia-driver-cuda": "580.105.08-1",
        "nvidia-smi": "580.105.08-1",
        "libnvidia-ml1": "580.105.08-1",
        "libcuda1": "590.1-1",  # `>=` allows the newest
    }


@pytest.mark.parametrize(
    ("repo", "wanted", "message"),
    [
        (
            [stanza("app", "1-1", depends="lib (>= 3)"), stanza("lib", "2.0-1")],
            {"app": "*"},
            r"^package lib: no version in the repository satisfies app 1-1 needs lib \(>= 3\); refused",
        ),
        (
            [stanza("app", "1-1", depends="lib (<< 1.0)"), stanza("lib", "1.0-1"), stanza("lib", "1.10-1")],
            {"app": "*", "lib": "1.10-*"},
            r"^package lib: no version in the repository satisfies lib=1\.10-\* \(version knob\); app 1-1 needs lib",
        ),
        (
            [stanza("app", "1-1", depends="lib (>= 2)"), stanza("lib", "1.9-1"), stanza("lib", "1.10-1")],
            {"app": "*"},
            r"^package lib: .*app 1-1 needs lib \(>= 2\)",
        ),
    ],
)
def test_a_relation_no_carried_version_satisfies_is_refused_in_one_line(repo, wanted, message: str) -> None:
    with pytest.raises(HgxkitError, match=message) as err:
        chosen(repo, wanted)
    assert "\n" not in str(err.value)


def test_a_version_or_relation_that_is_not_debians_is_refused() -> None:
    with pytest.raises(HgxkitError, match=r"^version '--help' is not a Debian version; refused"):
        chosen([stanza("app", "1-1", depends="lib"), stanza("lib", "--help"), stanza("lib", "1-1")], {"app": "*"})
    with pytest.raises(HgxkitError, match=r"^relation 'lib \(~= 1\)' is not Debian's syntax"):
        chosen([stanza("app", "1-1", depends="lib (~= 1)"), stanza("lib", "1-1")], {"app": "*"})
