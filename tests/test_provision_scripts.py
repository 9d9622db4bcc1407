"""The provisioner scripts in amibuild/render/provision/, run with bash against a temporary root.

Each run sees a PATH holding only the stand-ins the test chose (tests/fakebin/stand-in linked as
yum, dnf, rpm, systemctl or sleep; each call is appended to a log) and the few coreutils the
scripts use, with no inherited environment. A real package manager can never run, and the
assertions on calls are exact.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PROVISION = TESTS.parent / "amibuild" / "render" / "provision"
STAND_IN = TESTS / "fakebin" / "stand-in"
BASH = shutil.which("bash") or "/bin/bash"
# The only external commands the scripts run apart from the stand-ins.
COREUTILS = ("mkdir", "sleep", "base64", "chmod")
DEFAULT_COMMANDS = ("yum", "rpm", "systemctl")


class Host:
    """A temporary root and call log; `run` executes one provisioner script against them."""

    def __init__(self, tmp_path: Path, coreutils: Path) -> None:
        self.root = tmp_path / "root"
        self.root.mkdir()
        self.log = tmp_path / "calls.log"
        self._tmp = tmp_path
        self._coreutils = coreutils
        self._runs = 0

    def run(
        self,
        script: str,
        env: dict[str, str] | None = None,
        commands: tuple[str, ...] = DEFAULT_COMMANDS,
    ) -> subprocess.CompletedProcess[str]:
        self._runs += 1
        bindir = self._tmp / f"bin-{self._runs}"
        bindir.mkdir()
        for command in commands:
            (bindir / command).symlink_to(STAND_IN)
        full_env = {
            "PATH": f"{bindir}:{self._coreutils}",
            "AMIBUILD_ROOT": str(self.root),
            "FAKE_LOG": str(self.log),
            **(env or {}),
        }
        return subprocess.run(
            [BASH, str(PROVISION / script)],
            env=full_env,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def files(self) -> dict[str, str]:
        """Every file under the root, by path relative to it."""
        return {
            str(path.relative_to(self.root)): path.read_text()
            for path in sorted(self.root.rglob("*"))
            if path.is_file()
        }

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path


@pytest.fixture(scope="session")
def coreutils(tmp_path_factory: pytest.TempPathFactory) -> Path:
    STAND_IN.chmod(0o755)  # in case a checkout dropped the executable bit
    folder = tmp_path_factory.mktemp("coreutils")
    for tool in COREUTILS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine to run the provisioner scripts"
        (folder / tool).symlink_to(found)
    return folder


@pytest.fixture
def host(tmp_path: Path, coreutils: Path) -> Host:
    return Host(tmp_path, coreutils)


# --- shellcheck ----------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
@pytest.mark.parametrize(
    "script",
    [*sorted(PROVISION.glob("*.sh")), STAND_IN],
    ids=lambda path: path.name,
)
def test_script_passes_shellcheck(script: Path) -> None:
    result = subprocess.run(
        ["shellcheck", "--norc", str(script)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- add-repos.sh --------------------------------------------------------------------------------

REPO_DIR = "etc/yum.repos.d"


def test_add_repos_writes_repo_with_gpgkey_and_imports_the_key(host: Host) -> None:
    result = host.run(
        "add-repos.sh",
        {"AMIBUILD_REPOS": "ceph|https://download.ceph.com/rpm-15.2.17/el7/$basearch|"
         "https://download.ceph.com/keys/release.asc"},
    )

    assert result.returncode == 0, result.stderr
    assert host.files() == {
        f"{REPO_DIR}/amibuild-ceph.repo": (
            "[ceph]\n"
            "name=ceph (added by amibuild)\n"
            "baseurl=https://download.ceph.com/rpm-15.2.17/el7/$basearch\n"
            "enabled=1\n"
            "gpgcheck=1\n"
            "gpgkey=https://download.ceph.com/keys/release.asc\n"
        )
    }
    assert host.calls() == ["rpm --import https://download.ceph.com/keys/release.asc"]
    assert "amibuild: " in result.stdout


def test_add_repos_without_gpgkey_disables_gpgcheck_and_imports_nothing(host: Host) -> None:
    result = host.run("add-repos.sh", {"AMIBUILD_REPOS": "internal|http://mirror.corp/el7|"})

    assert result.returncode == 0, result.stderr
    assert host.files() == {
        f"{REPO_DIR}/amibuild-internal.repo": (
            "[internal]\n"
            "name=internal (added by amibuild)\n"
            "baseurl=http://mirror.corp/el7\n"
            "enabled=1\n"
            "gpgcheck=0\n"
        )
    }
    assert host.calls() == []


def test_add_repos_writes_a_shipped_key_and_imports_it_from_the_file(host: Host) -> None:
    """A key shipped with the build (key:BASE64) is never fetched: the repo file points at it."""
    key = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENBF\n-----END PGP PUBLIC KEY BLOCK-----\n"
    record = "mirror|http://mirror.corp/el9|key:" + base64.b64encode(key.encode()).decode()

    result = host.run("add-repos.sh", {"AMIBUILD_REPOS": record})

    assert result.returncode == 0, result.stderr
    assert host.files() == {
        "etc/pki/rpm-gpg/RPM-GPG-KEY-amibuild-mirror": key,
        f"{REPO_DIR}/amibuild-mirror.repo": (
            "[mirror]\n"
            "name=mirror (added by amibuild)\n"
            "baseurl=http://mirror.corp/el9\n"
            "enabled=1\n"
            "gpgcheck=1\n"
            "gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-amibuild-mirror\n"
        ),
    }
    assert host.calls() == [f"rpm --import {host.root}/etc/pki/rpm-gpg/RPM-GPG-KEY-amibuild-mirror"]


def test_add_repos_writes_one_file_per_record_and_skips_blank_lines(host: Host) -> None:
    records = "\n  \nfirst|https://a.example/repo|https://a.example/key\n\t\nsecond|https://b.example/repo|\n"

    result = host.run("add-repos.sh", {"AMIBUILD_REPOS": records})

    assert result.returncode == 0, result.stderr
    assert sorted(host.files()) == [
        f"{REPO_DIR}/amibuild-first.repo",
        f"{REPO_DIR}/amibuild-second.repo",
    ]
    assert host.calls() == ["rpm --import https://a.example/key"]


def test_add_repos_twice_leaves_the_same_files(host: Host) -> None:
    env = {"AMIBUILD_REPOS": "one|https://a.example/repo|https://a.example/key\ntwo|https://b.example/|"}

    assert host.run("add-repos.sh", env).returncode == 0
    first = host.files()
    assert host.run("add-repos.sh", env).returncode == 0

    assert host.files() == first


@pytest.mark.parametrize("baseurl, mode", [("https://builder:s3cret@mirror.corp/el9/$basearch", 0o600),
                                           ("https://mirror.corp/el9/$basearch", 0o644)])
def test_add_repos_with_credentials_in_the_url_writes_a_file_root_alone_reads(host: Host, baseurl: str, mode: int) -> None:
    assert host.run("add-repos.sh", {"AMIBUILD_REPOS": f"mirror|{baseurl}|"}).returncode == 0

    path = host.root / REPO_DIR / "amibuild-mirror.repo"
    assert f"baseurl={baseurl}\n" in path.read_text() and path.stat().st_mode & 0o777 == mode


def test_add_repos_does_nothing_without_repos(host: Host) -> None:
    for value in ("", " \n\t\n"):
        result = host.run("add-repos.sh", {"AMIBUILD_REPOS": value})
        assert result.returncode == 0, result.stderr
    assert host.run("add-repos.sh").returncode == 0  # unset altogether

    assert host.files() == {}
    assert host.calls() == []


@pytest.mark.parametrize(
    ("record", "named"),
    [
        pytest.param("bad|ftp://mirror.example/el7|", "ftp://mirror.example/el7", id="ftp-baseurl"),
        pytest.param("bad|https://m.example/|file:///etc/pki/key", "file:///etc/pki/key", id="file-gpgkey"),
        pytest.param('bad|https://m.example/"x|', 'https://m.example/"x', id="quote-in-baseurl"),
        pytest.param("bad|https://m.example/`id`|", "https://m.example/`id`", id="backtick-in-baseurl"),
        pytest.param("bad|https://m.example/ x|", "https://m.example/ x", id="space-in-baseurl"),
        pytest.param("../../etc/passwd|https://m.example/|", "../../etc/passwd", id="path-in-name"),
        pytest.param("$(touch pwned)|https://m.example/|", "$(touch pwned)", id="substitution-in-name"),
        pytest.param("bad", "'bad' must be 'name|baseurl|gpgkey' but has 1 field(s)", id="no-baseurl"),
        pytest.param("bad|https://m.example/|key:not base64!", "'bad': its shipped gpgkey is not base64",
                     id="shipped-key-not-base64"),
        pytest.param("bad|https://m.example/|https://m.example/key|x", "'bad'", id="extra-field"),
        pytest.param("bad|ftp://ci:secret@m.example/|", "ftp://***@m.example/", id="credentials-masked"),
        pytest.param("good|https://other.example/|", "'good' is given more than once", id="duplicate-name"),
    ],
)
def test_add_repos_refuses_bad_record_and_writes_nothing(host: Host, record: str, named: str) -> None:
    # The good record comes first: nothing may be written until every record has been checked.
    records = f"good|https://m.example/repo|https://m.example/key\n{record}"

    result = host.run("add-repos.sh", {"AMIBUILD_REPOS": records})

    assert result.returncode != 0
    assert named in result.stderr
    assert "secret" not in result.stderr
    assert host.files() == {}
    assert host.calls() == []
    assert not (host.root / "pwned").exists()


# --- install-packages.sh -------------------------------------------------------------------------

NO_DELAY = {"AMIBUILD_RETRY_DELAY": "0"}


def test_install_asks_yum_for_exactly_the_listed_packages_and_verifies_each(host: Host) -> None:
    result = host.run(
        "install-packages.sh",
        {
            **NO_DELAY,
            "AMIBUILD_EXTRA_PACKAGES": " ceph-common-15.2.17\n\tnfs-utils  lvm2 ",
            "FAKE_INSTALLED": "ceph-common-15.2.17 nfs-utils lvm2",
        },
    )

    assert result.returncode == 0, result.stderr
    assert host.calls() == [
        "yum install -y ceph-common-15.2.17 nfs-utils lvm2",
        "rpm -q ceph-common-15.2.17",
        "rpm -q nfs-utils",
        "rpm -q lvm2",
    ]
    assert host.files() == {}


def test_install_uses_dnf_when_present(host: Host) -> None:
    result = host.run(
        "install-packages.sh",
        {**NO_DELAY, "AMIBUILD_EXTRA_PACKAGES": "jq", "FAKE_INSTALLED": "jq"},
        commands=("dnf", "yum", "rpm"),
    )

    assert result.returncode == 0, result.stderr
    assert host.calls() == ["dnf install -y jq", "rpm -q jq"]


def test_install_retries_a_failed_install_after_the_delay_then_succeeds(host: Host) -> None:
    result = host.run(
        "install-packages.sh",
        {
            "AMIBUILD_EXTRA_PACKAGES": "jq",
            "AMIBUILD_INSTALL_RETRIES": "3",
            "AMIBUILD_RETRY_DELAY": "7",
            "FAKE_INSTALL_FAILURES": "2",
            "FAKE_INSTALLED": "jq",
        },
        commands=("yum", "rpm", "sleep"),
    )

    assert result.returncode == 0, result.stderr
    assert host.calls() == [
        "yum install -y jq",
        "sleep 7",
        "yum install -y jq",
        "sleep 7",
        "yum install -y jq",
        "rpm -q jq",
    ]


def test_install_gives_up_after_the_configured_number_of_tries(host: Host) -> None:
    result = host.run(
        "install-packages.sh",
        {
            **NO_DELAY,
            "AMIBUILD_EXTRA_PACKAGES": "jq",
            "AMIBUILD_INSTALL_RETRIES": "2",
            "FAKE_INSTALL_FAILURES": "5",
            "FAKE_INSTALLED": "jq",
        },
    )

    assert result.returncode != 0
    assert host.calls() == ["yum install -y jq", "yum install -y jq"]
    assert "yum install failed 2 time(s)" in result.stderr


def test_install_tries_three_times_by_default(host: Host) -> None:
    result = host.run(
        "install-packages.sh",
        {"AMIBUILD_EXTRA_PACKAGES": "jq", "FAKE_INSTALL_FAILURES": "9"},
        commands=("yum", "rpm", "sleep"),
    )

    assert result.returncode != 0
    assert host.calls() == [
        "yum install -y jq",
        "sleep 10",
        "yum install -y jq",
        "sleep 10",
        "yum install -y jq",
    ]


def test_install_fails_when_a_package_is_missing(host: Host) -> None:
    # yum on Amazon Linux 2 exits 0 for a name no repository has; only rpm -q tells.
    result = host.run(
        "install-packages.sh",
        {
            **NO_DELAY,
            "AMIBUILD_EXTRA_PACKAGES": "ceph-common no-such-package",
            "FAKE_INSTALLED": "ceph-common",
        },
    )

    assert result.returncode == 1
    assert "no-such-package" in result.stderr
    assert "ceph-common" not in result.stderr
    assert host.calls() == [
        "yum install -y ceph-common no-such-package",
        "rpm -q ceph-common",
        "rpm -q no-such-package",
    ]


@pytest.mark.parametrize(
    ("packages", "named"),
    [
        pytest.param("jq ceph;rm -rf /", "ceph;rm", id="semicolon"),
        pytest.param("jq $(touch pwned)", "$(touch", id="dollar-substitution"),
        pytest.param("jq `touch pwned`", "`touch", id="backtick-substitution"),
        pytest.param("jq --installroot=/tmp/x", "--installroot=/tmp/x", id="option"),
        pytest.param("jq ../../x.rpm", "../../x.rpm", id="path"),
        pytest.param("jq kernel*", "kernel*", id="glob"),
        pytest.param("jq 'quoted'", "'quoted'", id="quote"),
    ],
)
def test_install_refuses_bad_package_name_and_installs_nothing(
    host: Host, packages: str, named: str
) -> None:
    result = host.run(
        "install-packages.sh", {**NO_DELAY, "AMIBUILD_EXTRA_PACKAGES": packages, "FAKE_INSTALLED": "jq"}
    )

    assert result.returncode != 0
    assert named in result.stderr
    assert host.calls() == []
    assert not (host.root / "pwned").exists()
    assert not Path("pwned").exists()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AMIBUILD_INSTALL_RETRIES", "0"),
        ("AMIBUILD_INSTALL_RETRIES", "three"),
        ("AMIBUILD_INSTALL_RETRIES", "1e3"),
        ("AMIBUILD_RETRY_DELAY", "-1"),
        ("AMIBUILD_RETRY_DELAY", "010"),
        ("AMIBUILD_RETRY_DELAY", "$(id)"),
    ],
)
def test_install_refuses_bad_retry_setting(host: Host, variable: str, value: str) -> None:
    result = host.run(
        "install-packages.sh", {**NO_DELAY, "AMIBUILD_EXTRA_PACKAGES": "jq", variable: value}
    )

    assert result.returncode != 0
    assert variable in result.stderr
    assert f"'{value}'" in result.stderr
    assert host.calls() == []


def test_install_does_nothing_without_packages(host: Host) -> None:
    for env in ({}, {"AMIBUILD_EXTRA_PACKAGES": ""}, {"AMIBUILD_EXTRA_PACKAGES": " \n\t "}):
        result = host.run("install-packages.sh", env)
        assert result.returncode == 0, result.stderr

    assert host.calls() == []


def test_install_fails_clearly_without_a_package_manager(host: Host) -> None:
    result = host.run(
        "install-packages.sh", {**NO_DELAY, "AMIBUILD_EXTRA_PACKAGES": "jq"}, commands=("rpm",)
    )

    assert result.returncode != 0
    assert "neither dnf nor yum" in result.stderr
    assert host.calls() == []


# --- configure-proxy.sh --------------------------------------------------------------------------

HTTP = "http://proxy.corp:3128"
HTTPS = "http://proxy.corp:3129"
NO_PROXY = "localhost,127.0.0.1,169.254.169.254,.internal,10.0.0.0/16"
# What the image gets: the entries given, then the ones always bypassed that were not among them.
BAKED_NO_PROXY = NO_PROXY + ",169.254.170.2,169.254.170.23"
ALWAYS_NO_PROXY = "169.254.169.254,169.254.170.2,169.254.170.23,localhost,127.0.0.1,.internal"
PROXIES = {"AMIBUILD_HTTP_PROXY": HTTP, "AMIBUILD_HTTPS_PROXY": HTTPS, "AMIBUILD_NO_PROXY": NO_PROXY}
YUM_CONF = (
    "[main]\n"
    "cachedir=/var/cache/yum/$basearch/$releasever\n"
    "proxy = http://old-proxy:8080\n"
    "keepcache=0\n"
    "proxy=http://older-proxy:8080\n"
    "\n"
    "[extras]\n"
    "proxy=_none_\n"
)
ENVIRONMENT = "LANG=en_US.UTF-8\nhttp_proxy=http://stale:1\nexport HTTPS_PROXY=http://stale:2\nPATH=/usr/bin\n"
PROXY_SETTINGS = [
    f"HTTP_PROXY={HTTP}",
    f"HTTPS_PROXY={HTTPS}",
    f"NO_PROXY={BAKED_NO_PROXY}",
    f"http_proxy={HTTP}",
    f"https_proxy={HTTPS}",
    f"no_proxy={BAKED_NO_PROXY}",
]
# nodeadm-config runs before cloud-init: only the image can give it the proxy on the first boot. AL2's
# kubelet requires sandbox-image.service, whose `aws ecr get-login-password` must reach ECR through it.
UNITS = ("containerd", "docker", "kubelet", "sandbox-image", "nodeadm-config", "nodeadm-run")
VPC_ENV = "EnvironmentFile=-/run/amibuild/proxy-vpc.env\n"
BOOT_FILES = ("etc/amibuild/proxy-vpc-cidr.sh", "etc/systemd/system/amibuild-proxy-vpc.service")


def dropin(unit: str) -> str:
    return f"etc/systemd/system/{unit}.service.d/http-proxy.conf"


def test_proxy_configures_yum_environment_and_unit_dropins_then_reloads_systemd(host: Host) -> None:
    host.write("etc/yum.conf", YUM_CONF)
    host.write("etc/environment", ENVIRONMENT)

    result = host.run("configure-proxy.sh", PROXIES)

    assert result.returncode == 0, result.stderr
    expected_dropin = "[Service]\n" + "".join(f'Environment="{s}"\n' for s in PROXY_SETTINGS) + VPC_ENV
    files = host.files()
    for name in BOOT_FILES:  # run at boot: tested below
        assert files.pop(name)
    assert files == {
        # The HTTPS proxy wins for yum; the old [main] values go, the repo-level one stays.
        "etc/yum.conf": (
            "[main]\n"
            f"proxy={HTTPS}\n"
            "cachedir=/var/cache/yum/$basearch/$releasever\n"
            "keepcache=0\n"
            "\n"
            "[extras]\n"
            "proxy=_none_\n"
        ),
        "etc/environment": "LANG=en_US.UTF-8\nPATH=/usr/bin\n" + "".join(f"{s}\n" for s in PROXY_SETTINGS),
        "etc/amibuild/proxy-no-proxy": BAKED_NO_PROXY + "\n",
        **{dropin(unit): expected_dropin for unit in UNITS},
    }
    assert host.calls() == ["systemctl daemon-reload", "systemctl enable amibuild-proxy-vpc.service"]


def test_proxy_twice_leaves_the_same_files(host: Host) -> None:
    host.write("etc/yum.conf", YUM_CONF)
    host.write("etc/environment", ENVIRONMENT)

    assert host.run("configure-proxy.sh", PROXIES).returncode == 0
    first = host.files()
    assert host.run("configure-proxy.sh", PROXIES).returncode == 0

    assert host.files() == first
    assert first["etc/yum.conf"].count("proxy=") == 2  # [main] and [extras]


def test_proxy_adds_proxy_to_main_when_yum_conf_has_none(host: Host) -> None:
    host.write("etc/yum.conf", "[main]\ngpgcheck=1\n[other]\nx=1")  # no final newline

    result = host.run("configure-proxy.sh", {"AMIBUILD_HTTP_PROXY": HTTP})

    assert result.returncode == 0, result.stderr
    assert host.files()["etc/yum.conf"] == f"[main]\nproxy={HTTP}\ngpgcheck=1\n[other]\nx=1\n"


def test_proxy_sets_dnf_conf_and_creates_no_yum_conf(host: Host) -> None:
    host.write("etc/dnf/dnf.conf", "[main]\ninstallonly_limit=3\n")

    result = host.run("configure-proxy.sh", PROXIES)

    assert result.returncode == 0, result.stderr
    files = host.files()
    assert files["etc/dnf/dnf.conf"] == f"[main]\nproxy={HTTPS}\ninstallonly_limit=3\n"
    assert "etc/yum.conf" not in files
    assert files["etc/environment"] == "".join(f"{s}\n" for s in PROXY_SETTINGS)


def test_proxy_with_only_an_http_proxy_sends_https_through_it_and_always_bypasses_metadata(host: Host) -> None:
    host.write("etc/yum.conf", "[main]\n")

    result = host.run("configure-proxy.sh", {"AMIBUILD_HTTP_PROXY": HTTP})

    assert result.returncode == 0, result.stderr
    files = host.files()
    assert files["etc/yum.conf"] == f"[main]\nproxy={HTTP}\n"
    settings = [f"HTTP_PROXY={HTTP}", f"HTTPS_PROXY={HTTP}", f"NO_PROXY={ALWAYS_NO_PROXY}",
                f"http_proxy={HTTP}", f"https_proxy={HTTP}", f"no_proxy={ALWAYS_NO_PROXY}"]
    assert files["etc/environment"] == "".join(f"{s}\n" for s in settings)
    for unit in UNITS:
        assert files[dropin(unit)] == "[Service]\n" + "".join(f'Environment="{s}"\n' for s in settings) + VPC_ENV


def test_proxy_doubles_percent_for_systemd_and_keeps_credentials_out_of_output(host: Host) -> None:
    proxy = "http://builder:s3cr%40t@proxy.corp:3128"

    result = host.run("configure-proxy.sh", {"AMIBUILD_HTTPS_PROXY": proxy})

    assert result.returncode == 0, result.stderr
    files = host.files()
    assert f"HTTPS_PROXY={proxy}\n" in files["etc/environment"]
    assert 'Environment="HTTPS_PROXY=http://builder:s3cr%%40t@proxy.corp:3128"' in files[dropin("docker")]
    assert "s3cr" not in result.stdout + result.stderr


@pytest.mark.parametrize("proxy, mode", [("http://builder:s3cret@proxy.corp:3128", 0o600), (HTTP, 0o644)])
def test_proxy_with_credentials_writes_them_only_into_files_root_alone_reads(host: Host, proxy: str, mode: int) -> None:
    for name in ("etc/dnf/dnf.conf", "etc/environment"):
        host.write(name, "[main]\n" if "dnf" in name else "LANG=C\n").chmod(0o644)

    assert host.run("configure-proxy.sh", {"AMIBUILD_HTTPS_PROXY": proxy}).returncode == 0

    for name in ("etc/dnf/dnf.conf", "etc/environment", *(dropin(unit) for unit in UNITS)):
        assert proxy in host.files()[name].replace("%%", "%") and (host.root / name).stat().st_mode & 0o777 == mode, name


def test_proxy_skips_daemon_reload_without_systemctl(host: Host) -> None:
    result = host.run("configure-proxy.sh", PROXIES, commands=())

    assert result.returncode == 0, result.stderr
    assert dropin("containerd") in host.files()
    assert host.calls() == []


def test_proxy_does_nothing_without_a_proxy(host: Host) -> None:
    host.write("etc/yum.conf", YUM_CONF)
    before = host.files()

    for env in ({}, {"AMIBUILD_HTTP_PROXY": "", "AMIBUILD_HTTPS_PROXY": "", "AMIBUILD_NO_PROXY": NO_PROXY}):
        result = host.run("configure-proxy.sh", env)
        assert result.returncode == 0, result.stderr

    assert host.files() == before
    assert host.calls() == []


@pytest.mark.parametrize(
    ("env", "named"),
    [
        pytest.param({"AMIBUILD_HTTP_PROXY": "ftp://proxy.corp:21"}, "ftp://proxy.corp:21", id="ftp"),
        pytest.param({"AMIBUILD_HTTPS_PROXY": "proxy.corp:3128"}, "proxy.corp:3128", id="no-scheme"),
        pytest.param({"AMIBUILD_HTTP_PROXY": 'http://proxy"x'}, 'http://proxy"x', id="quote"),
        pytest.param({"AMIBUILD_HTTP_PROXY": "http://proxy`id`"}, "http://proxy`id`", id="backtick"),
        pytest.param(
            {"AMIBUILD_HTTP_PROXY": "http://proxy:3128\nLD_PRELOAD=/tmp/x.so"},
            "LD_PRELOAD",
            id="newline-injection",
        ),
        pytest.param(
            {"AMIBUILD_HTTP_PROXY": "ftp://builder:secret@proxy.corp:21"},
            "ftp://***@proxy.corp:21",
            id="credentials-masked",
        ),
        pytest.param(
            {"AMIBUILD_HTTP_PROXY": HTTP, "AMIBUILD_NO_PROXY": "localhost,\"evil\""},
            '"evil"',
            id="no-proxy-quote",
        ),
        pytest.param(
            {"AMIBUILD_HTTP_PROXY": HTTP, "AMIBUILD_NO_PROXY": "localhost,a b"},
            "a b",
            id="no-proxy-space",
        ),
        pytest.param(
            {"AMIBUILD_HTTP_PROXY": HTTP, "AMIBUILD_NO_PROXY": "localhost\nX=1"},
            "X=1",
            id="no-proxy-newline",
        ),
    ],
)
def test_proxy_refuses_bad_value_and_writes_nothing(
    host: Host, env: dict[str, str], named: str
) -> None:
    host.write("etc/yum.conf", YUM_CONF)
    before = host.files()

    result = host.run("configure-proxy.sh", env)

    assert result.returncode != 0
    assert named in result.stderr
    assert "secret" not in result.stderr
    assert host.files() == before
    assert host.calls() == []


FAKE_IMDS_CURL = """#!/bin/bash
# instance metadata as IMDSv2 answers it: a token, the MAC, the VPC's two CIDR blocks
case "${@: -1}" in
    */api/token) echo token ;;
    */meta-data/mac) echo 0a:1b:2c:3d:4e:5f ;;
    */vpc-ipv4-cidr-blocks) printf '10.20.0.0/16\\n100.64.0.0/16\\n' ;;
    *) exit 22 ;;
esac
"""


def test_proxy_baked_in_bypasses_the_vpc_cidrs_found_at_boot_for_every_unit(host: Host, tmp_path: Path) -> None:
    assert host.run("configure-proxy.sh", {"AMIBUILD_HTTP_PROXY": HTTP}).returncode == 0
    files = host.files()
    unit = files["etc/systemd/system/amibuild-proxy-vpc.service"]
    assert "Before=cloud-init.service nodeadm-config.service nodeadm-run.service containerd.service" in unit
    assert "WantedBy=multi-user.target" in unit
    # the boot step, run as the node runs it (with instance metadata answered by a stand-in curl)
    bindir = tmp_path / "boot-bin"
    bindir.mkdir()
    (bindir / "curl").write_text(FAKE_IMDS_CURL)
    (bindir / "curl").chmod(0o755)
    for tool in ("cat", "grep", "paste", "mkdir"):
        (bindir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")

    booted = subprocess.run([BASH, str(host.root / BOOT_FILES[0])], capture_output=True, text=True, timeout=10,
                            env={"PATH": str(bindir), "AMIBUILD_ROOT": str(host.root)}, check=False)

    assert booted.returncode == 0, booted.stderr
    at_boot = "10.20.0.0/16,100.64.0.0/16," + ALWAYS_NO_PROXY
    assert host.files()["run/amibuild/proxy-vpc.env"] == f"NO_PROXY={at_boot}\nno_proxy={at_boot}\n"
    environment = host.files()["etc/environment"].splitlines()
    assert f"NO_PROXY={at_boot}" in environment and f"no_proxy={at_boot}" in environment
    assert f"HTTPS_PROXY={HTTP}" in environment
    assert len([line for line in environment if line.lower().startswith("no_proxy=")]) == 2
    # every proxied unit reads that file after its own Environment= lines, so the boot value wins
    for name in UNITS:
        assert files[dropin(name)].endswith(VPC_ENV)
