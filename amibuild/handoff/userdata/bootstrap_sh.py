"""The options AL2's /etc/eks/bootstrap.sh takes, and a check of `--bootstrap-args` against them. Pure.

bootstrap.sh reads its arguments in a `case` over `$1`: every option it knows takes the next word
as its value (`$2`) and shifts twice; anything else is kept as a positional word and, past the
cluster name, silently ignored. So ``--use-max-pods=false`` does nothing at all (bootstrap.sh
wants ``--use-max-pods false``), and an option given last dies on ``$2`` under ``set -u``.

`OPTIONS` is our own table of the options bootstrap.sh knows (read from amazon-eks-ami's
bootstrap.sh; a test compares it with the `case` labels of the real script), and
`check_bootstrap_words` refuses what bootstrap.sh would ignore or fail on, naming the option.
"""

from __future__ import annotations

from collections.abc import Sequence

from amibuild.errors import SpecError

# Every option bootstrap.sh takes; each takes exactly one value, the word after it.
OPTIONS: frozenset[str] = frozenset({
    "--apiserver-endpoint",
    "--aws-api-retry-attempts",
    "--b64-cluster-ca",
    "--cluster-id",
    "--container-runtime",
    "--containerd-config-file",
    "--dns-cluster-ip",
    "--docker-config-json",
    "--enable-docker-bridge",
    "--enable-local-outpost",
    "--ip-family",
    "--kubelet-extra-args",
    "--local-disks",
    "--mount-bpf-fs",
    "--pause-container-account",
    "--pause-container-version",
    "--service-ipv6-cidr",
    "--use-max-pods",
})
# Options whose value is itself a list of flags (or a JSON document), so a value starting with
# "--" is what the user meant.
FLAG_VALUED: frozenset[str] = frozenset({"--kubelet-extra-args", "--docker-config-json"})
# bootstrap.sh writes --kubelet-extra-args into `Environment='KUBELET_EXTRA_ARGS=...'` of a systemd
# drop-in: a quote ends that value, % starts a systemd specifier, a backslash escapes.
_EXTRA_ARGS_UNSAFE = frozenset("'\"\\%`$")


def check_bootstrap_words(words: Sequence[str], flag: str = "--bootstrap-args") -> dict[str, str]:
    """{option: value} of bootstrap.sh arguments, or SpecError naming the option that is wrong."""
    options: dict[str, str] = {}
    for index in range(0, len(words), 2):
        word = words[index]
        name, eq, _ = word.partition("=")
        if eq and name in OPTIONS:
            raise SpecError(f"{flag}: bootstrap.sh ignores {word!r}; write {name} VALUE (two words)")
        if word not in OPTIONS:
            raise SpecError(f"{flag}: {word!r} is not an option of bootstrap.sh (it takes "
                            f"{', '.join(sorted(OPTIONS))}, each with a value)")
        if index + 1 >= len(words):
            raise SpecError(f"{flag}: {word} needs a value (bootstrap.sh reads the next word)")
        value = words[index + 1]
        if value in OPTIONS and word not in FLAG_VALUED:
            raise SpecError(f"{flag}: {word} needs a value, and the next word is the option {value}")
        if word in options:
            raise SpecError(f"{flag}: {word} is given twice")
        if word == "--kubelet-extra-args":
            bad = sorted(ch for ch in set(value) if ch in _EXTRA_ARGS_UNSAFE or ch in "\n\r\t")
            if bad:
                raise SpecError(f"{flag}: --kubelet-extra-args holds {bad[0]!r}, which bootstrap.sh's systemd "
                                "drop-in would mangle; give kubelet settings with --kubelet-flag, --node-label, "
                                "--taint or --max-pods")
        options[word] = value
    return options
