"""Threads chosen on purpose (models/threads.py): the plan's arithmetic and who wins (the
operator's setting, then OMP_NUM_THREADS, then the caller); applied in a fresh interpreter before
torch loads, the wait policy is in the environment OpenMP reads and torch runs the planned
threads, and torch's large buffers are advised onto huge pages; the command line and the app
apply it before anything imports torch."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from models import threads
from models.threads import (GC_FIRST_GENERATION, configure_threads, thread_plan,
                            threads_setting)

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = (threads.SETTING_VARIABLE, threads.THREADS_VARIABLE, threads.WAIT_POLICY_VARIABLE,
             threads.BLAS_THREADS_VARIABLE, threads.HUGE_PAGES_VARIABLE)


@pytest.fixture
def clean_environment(monkeypatch):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_threads_per_forward_are_the_cores_shared_by_the_sessions(clean_environment):
    assert thread_plan(sessions=1, cores=4).threads == 4
    assert thread_plan(sessions=2, cores=4).threads == 2
    assert thread_plan(sessions=2, cores=2).threads == 1
    assert thread_plan(sessions=5, cores=2).threads == 1  # never fewer than one
    assert thread_plan(sessions=1, cores=4, threads=1).threads == 1  # the caller fixes them
    assert thread_plan(cores=2).wait_policy == "PASSIVE"
    with pytest.raises(ValueError, match="at least 1"):
        thread_plan(sessions=0)


def test_the_operators_setting_wins_then_omp_num_threads(clean_environment):
    clean_environment.setenv(threads.THREADS_VARIABLE, "3")
    assert thread_plan(sessions=4, cores=4, threads=1).threads == 3
    clean_environment.setenv(threads.SETTING_VARIABLE, "2")
    assert thread_plan(sessions=4, cores=4, threads=1).threads == 2
    clean_environment.setenv(threads.SETTING_VARIABLE, " Auto ")
    assert threads_setting() is None and thread_plan(sessions=4, cores=4).threads == 3
    clean_environment.setenv(threads.WAIT_POLICY_VARIABLE, "active")
    assert thread_plan().wait_policy == "ACTIVE"  # the operator's policy is kept


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5"])
def test_a_setting_that_is_not_a_number_of_threads_is_one_sentence(clean_environment, text):
    clean_environment.setenv(threads.SETTING_VARIABLE, text)
    with pytest.raises(ValueError, match=f"ATTENTION_EXPLORER_THREADS must be .* not '{text}'"):
        threads_setting()
    before = __import__("torch").get_num_threads()
    try:
        plan = configure_threads(sessions=1, threads=before)  # logged, then as `auto`
    finally:
        __import__("torch").set_num_threads(before)
    assert plan.threads == before


def fresh_interpreter(code: str, **settings: str) -> dict:
    environment = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    environment.update(settings)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment,
                          capture_output=True, text=True, check=True, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


REPORT = ("import gc, json, os, sys, torch; print(json.dumps({'threads': torch.get_num_threads(), "
          "'policy': os.environ.get('OMP_WAIT_POLICY'), 'active': plan.wait_policy_active, "
          "'collector': gc.get_threshold()[0]}))")


def test_applied_before_torch_loads_the_plan_is_what_torch_and_openmp_run():
    applied = fresh_interpreter(
        "from models.threads import configure_threads\n"
        "plan = configure_threads(sessions=1)\n" + REPORT, ATTENTION_EXPLORER_THREADS="1")
    assert applied == {"threads": 1, "policy": "PASSIVE", "active": True,
                       "collector": GC_FIRST_GENERATION}
    late = fresh_interpreter(
        "import torch\nfrom models.threads import configure_threads\n"
        "plan = configure_threads(sessions=1)\n" + REPORT, ATTENTION_EXPLORER_THREADS="1")
    assert late == {"threads": 1, "policy": None, "active": False,  # said, not pretended
                    "collector": GC_FIRST_GENERATION}


def test_the_python_api_collects_less_often_before_the_engine_imports():
    """`import attention_explorer` raises the collector's threshold before torch and the engine
    import (models/threads.py: a fifth of the imports' time went to the collector's passes)."""
    report = ("import gc, json, sys\n"
              "print(json.dumps([gc.get_threshold()[0], 'torch' in sys.modules]))")
    assert fresh_interpreter(report) == [700, False]  # Python's own
    assert fresh_interpreter("import attention_explorer\n" + report) == [GC_FIRST_GENERATION, True]


# A 64 MB tensor's memory, looked up in the kernel's own account of this process's mappings:
# "hg" in the mapping's VmFlags is the huge-page advice torch's allocator gave the kernel.
HUGE_PAGE_ADVICE = (
    "import json, torch\n"
    "buffer = torch.ones(16 * 1024 * 1024)\n"
    "address, flags, inside = buffer.data_ptr(), None, False\n"
    "for line in open('/proc/self/smaps'):\n"
    "    head = line.split()[0]\n"
    "    if '-' in head and not head.endswith(':'):\n"
    "        start, stop = (int(part, 16) for part in head.split('-'))\n"
    "        inside = start <= address < stop\n"
    "    elif inside and head == 'VmFlags:':\n"
    "        flags = line.split()[1:]\n"
    "print(json.dumps({'advised': flags is not None and 'hg' in flags,\n"
    "                  'found': flags is not None}))")


def test_torchs_large_buffers_are_advised_onto_huge_pages_unless_the_operator_says_no():
    configured = "from models.threads import configure_threads\nconfigure_threads(sessions=1)\n"
    assert fresh_interpreter(configured + HUGE_PAGE_ADVICE) == {"advised": True, "found": True}
    # THP_MEM_ALLOC_ENABLE=0 (the operator's) and torch loaded before the plan keep 4 kB pages
    assert fresh_interpreter(configured + HUGE_PAGE_ADVICE, THP_MEM_ALLOC_ENABLE="0") == \
        {"advised": False, "found": True}
    assert fresh_interpreter("import torch\n" + configured + HUGE_PAGE_ADVICE) == \
        {"advised": False, "found": True}


LIGHT = ("import sys, cli.main\n"
         "cli.main.main(['config'])\n"
         "light = 'torch' not in sys.modules and 'transformers' not in sys.modules\n")
COMPUTED = ("from models.threads import thread_plan\nplan = thread_plan()\n"
            "import json, os, torch; print(json.dumps({'light': light, "
            "'threads': torch.get_num_threads(), 'policy': os.environ.get('OMP_WAIT_POLICY')}))")


@pytest.mark.parametrize("command", [
    # a command that computes: its mistake is found once the engine is there
    "cli.main.main(['export', '--text', ' ', '--view', 'heatmap', '--format', 'csv', "
    "'--out', 'unwritten.csv'])",
    # a mistaken --model never loads torch (below); a model that loads sets the plan first
    "cli.main.main(['patch', '--model', 'pretrained:/nonexistent-folder', '--clean', 'a', "
    "'--corrupted', 'b', '--answer', 'x', '--wrong', 'y', '--out', 'unwritten.csv'])"])
def test_the_command_line_loads_torch_only_to_compute_and_sets_the_plan_first(command):
    applied = fresh_interpreter(LIGHT + command + "\n" + COMPUTED,
                                ATTENTION_EXPLORER_THREADS="1")
    # `config` (as `--help` and a mistaken argument) answers without torch or transformers
    assert applied == {"light": True, "threads": 1, "policy": "PASSIVE"}


def test_a_mistaken_model_is_refused_before_torch_or_transformers_load():
    """The kind registry reads --model while the line is parsed and loads no model code: a
    mistaken model is refused at once, not after the seconds of importing torch."""
    shown = fresh_interpreter(
        "import json, sys, cli.main\n"
        "try:\n    cli.main.main(['patch', '--model', 'nonsense', '--clean', 'a', '--corrupted', "
        "'b', '--answer', 'x', '--wrong', 'y', '--out', 'unwritten.csv'])\n"
        "except SystemExit as stop:\n    code = stop.code\n"
        "print(json.dumps({'code': code, 'loaded': sorted(name for name in ('torch', "
        "'transformers') if name in sys.modules)}))")
    assert shown == {"code": 2, "loaded": []}
    assert not (ROOT / "unwritten.csv").exists()


def test_the_app_applies_the_plan_before_any_other_import():
    tree = ast.parse((ROOT / "app.py").read_text())
    body = [node for node in tree.body if not (isinstance(node, ast.Expr)
                                               and isinstance(node.value, ast.Constant))]
    standard = {"logging", "pathlib"}
    for index, node in enumerate(body):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            assert ast.unparse(node.value) == "configure_server_threads()"
            break
        if isinstance(node, ast.ImportFrom):
            assert node.module in standard | {"models.threads"}, node.module
        else:
            assert isinstance(node, ast.Import), ast.unparse(node)
            # the budgets and settings (the configuration file's `threads` reaches the
            # environment before the plan reads it), which load no torch:
            assert {alias.name for alias in node.names} <= standard | {"models.limits"}
    else:
        pytest.fail("app.py never calls configure_server_threads()")
    loaded = subprocess.run([sys.executable, "-c", "import sys, models.limits; "
                             "print('torch' in sys.modules)"], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    assert loaded.stdout.strip() == "False"
    launcher = (ROOT / "start.sh").read_text()
    assert "OMP_WAIT_POLICY" in launcher and "THP_MEM_ALLOC_ENABLE" in launcher
