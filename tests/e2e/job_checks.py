"""Issue 49 against a lab's real daemons: a CPU job and a GPU job of two users, then the `job`
task beside sacct, `job_output` read as the job's user where the output is (refused to the
other user, and elsewhere on allocation-local disks), and `usage` beside the jobs' own TRES
and elapsed times."""

import base64
import json
import shlex
import time
from datetime import UTC, datetime, timedelta

from lab_tools import lab_task, on_host

from driver.lab import spec as lab_spec

# What a job may print that no answer may be shaped by: a `|`, newlines, a JSON-looking line,
# terminal escape sequences, bytes that are not UTF-8.
HOSTILE_OUTPUT = r"a|b\n}{\"status\": \"ok\"}\n\033[31mred\033[0m\n\377\376|end\n"
HOSTILE_NAME = "name|with\nnewline\033[0m"


def _submit(lab_name: str, ctl: str, user: str, options: str, script: str) -> int:
    quoted = shlex.quote(f"#!/bin/bash\n{script}\n")
    job = on_host(
        lab_name,
        ctl,
        f"cd ~{user} && printf '%s' {quoted} | runuser -u {user} -- sbatch --parsable "
        f"--mem=64M {options}",
    )
    return int(job.strip().split(";")[0])


def _wait_until_the_queue_is_empty(lab_name: str, ctl: str) -> None:
    on_host(
        lab_name,
        ctl,
        'for i in $(seq 120); do test -z "$(squeue -h)" && exit 0; sleep 1; done; exit 1',
    )


def _tail_bytes(lab_name: str, host: str, path: str, size: int) -> bytes:
    encoded = on_host(lab_name, host, f"tail -c {size} {shlex.quote(path)} | base64 -w0")
    return base64.b64decode(encoded)


def check_job_detail_output_and_usage(
    lab_name: str,
    env: dict[str, str],
    other: str,
    cpu_node: str,
    gpu_node: str,
    shared: bool,
    gpu_type: str | None = None,
) -> dict:
    """`other`: a second cluster user, not an admin; the CPU job runs on `cpu_node`, the GPU
    job on `gpu_node` (which has a GPU, of `gpu_type` where typed); `shared`: the homes are on
    the platform's storage. Returns what the closing note shows."""
    ctl = f"{lab_name}-ctl"
    user = lab_spec.LAB_USER["name"]
    name = shlex.quote(HOSTILE_NAME)
    cpu = _submit(
        lab_name, ctl, user, f"-J \"$(printf {name})\" -w {cpu_node} -e err-%j.txt",
        f"printf '{HOSTILE_OUTPUT}'; seq 1 20000; echo on-stderr >&2; sleep 3",
    )  # fmt: skip
    gpu = _submit(
        lab_name, ctl, other, f"-J gpu-job -w {gpu_node} --gres=gpu:1 -o gpu-%j.out",
        "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; sleep 4",
    )  # fmt: skip
    _wait_until_the_queue_is_empty(lab_name, ctl)
    shown: dict = {}

    for job_id, owner in ((cpu, user), (gpu, other)):
        code, detail = lab_task(lab_name, env, "job", owner, job_id=job_id)
        assert code == 0, detail
        (part,) = detail["output"]["parts"]
        recorded = on_host(
            lab_name,
            ctl,
            f"sacct -X -n -P --delimiter=';' -j {job_id} "
            "-o State,ExitCode,Elapsed,NodeList,AllocTRES,User,Account",
        )
        state, exit_code, elapsed, nodes, tres, recorded_user, account = recorded.strip().split(";")
        assert (part["state"], f"{part['exit_code']}:{part['signal']}", part["elapsed"]) == (
            state.lower(), exit_code, elapsed,
        )  # fmt: skip
        assert (part["nodes"], part["user"], part["account"]) == (nodes, recorded_user, account)
        assert part["gpus"] == (1 if job_id == gpu else 0), (part, tres)
        if job_id == gpu and gpu_type:  # accounting tracks each GPU type the nodes recorded
            assert part["gpus_by_type"] == {gpu_type: 1}, (part, tres)
        shown[owner] = {"job": part}

        batch_host = part["batch_host"]
        code, output = lab_task(
            lab_name, env, "job_output", owner, on=batch_host, job_id=job_id, tail_kib=1
        )
        assert code == 0, output
        answer = output["output"]
        assert answer["read_as"] == owner and answer["read_on"] == batch_host
        expected = _tail_bytes(lab_name, batch_host, answer["path"], 1024)
        assert answer["content"] == expected.decode("utf-8", errors="replace")
        assert answer["size_bytes"] > 1024 or job_id == gpu
        assert answer["truncated"] == (answer["size_bytes"] > 1024)
        assert output["audit"]["outcome"] == "ok" and output["audit"]["user"] == owner
        shown[owner]["job_output"] = {k: v for k, v in answer.items() if k != "content"}
        # the other user may not read it, whatever the file's mode
        stranger = other if owner == user else user
        code, refused = lab_task(
            lab_name, env, "job_output", stranger, on=batch_host, job_id=job_id
        )
        assert code == 3 and refused["error"]["code"] == "forbidden", refused
        assert refused["audit"]["outcome"] == "forbidden"

    code, errors = lab_task(
        lab_name, env, "job_output", user, on=shown[user]["job"]["batch_host"],
        job_id=cpu, stream="stderr",
    )  # fmt: skip
    assert code == 0 and errors["output"]["content"] == "on-stderr\n", errors
    code, gpu_out = lab_task(lab_name, env, "job_output", other, on=gpu_node, job_id=gpu)
    assert gpu_out["output"]["content"].startswith("CUDA_VISIBLE_DEVICES="), gpu_out
    if cpu_node != gpu_node:
        code, there = lab_task(lab_name, env, "job_output", user, on=gpu_node, job_id=cpu)
        if shared:  # the platform's storage: any node reads it
            assert code == 0 and there["output"]["read_on"] == gpu_node, there
        else:
            assert code == 4 and "own disk" in there["error"]["message"], there

    shown["usage"] = _check_usage(lab_name, env, ctl, user, other)
    return shown


def _check_usage(lab_name: str, env: dict[str, str], ctl: str, user: str, other: str) -> dict:
    """`usage` from yesterday to today (UTC) equals each allocation's TRES times its elapsed
    seconds as sacct records them, per account and user, with no job running."""
    today = datetime.now(UTC).date()
    period = {"from": str(today - timedelta(days=1)), "to": str(today)}
    started = time.perf_counter()
    code, usage = lab_task(lab_name, env, "usage", **period)
    seconds = time.perf_counter() - started
    assert code == 0, usage
    rows = on_host(
        lab_name,
        ctl,
        f"sacct -X -D -a -n -P --delimiter=';' -S {period['from']}T00:00:00 -E now "
        "-o Account,User,AllocTRES,ElapsedRaw",
    )
    expected: dict[tuple[str, str], list[int]] = {}
    typed: dict[tuple[str, str], dict[str, int]] = {}
    for row in rows.strip().splitlines():
        account, name, tres, elapsed = row.split(";")
        counts = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
        figures = expected.setdefault((account, name), [0, 0])
        figures[0] += int(counts.get("cpu", 0)) * int(elapsed)
        figures[1] += int(counts.get("gres/gpu", 0)) * int(elapsed)
        for key, count in counts.items():
            if key.startswith("gres/gpu:"):
                by_type = typed.setdefault((account, name), {})
                kind = key.split(":", 1)[1]
                by_type[kind] = by_type.get(kind, 0) + int(count) * int(elapsed)
    answered = {
        (a["account"], u["user"]): [u["cpu_seconds"], u["gpu_seconds"]]
        for a in usage["output"]["accounts"]
        for u in a["users"]
    }
    expected = {key: value for key, value in expected.items() if value != [0, 0]}
    assert answered == expected, (answered, expected)
    hours_by_type = {
        (a["account"], u["user"]): u["gpu_hours_by_type"]
        for a in usage["output"]["accounts"]
        for u in a["users"]
        if u["gpu_hours_by_type"]
    }
    assert hours_by_type == {
        key: {kind: round(seconds / 3600, 4) for kind, seconds in by_type.items() if seconds}
        for key, by_type in typed.items()
        if any(by_type.values())
    }, (hours_by_type, typed)
    days = usage["output"]["days"]
    assert sum(d["cpu_seconds"] for d in days) == sum(v[0] for v in expected.values())
    assert sum(d["gpu_seconds"] for d in days) == sum(v[1] for v in expected.values()) > 0
    # a user who is not an admin sees their own rows only
    code, own = lab_task(lab_name, env, "usage", other, **period)
    assert code == 0 and own["output"]["scope"] == "user" and own["output"]["days"] == []
    assert {u["user"] for a in own["output"]["accounts"] for u in a["users"]} == {other}
    return {"answer": usage["output"], "seconds": round(seconds, 2), "sacct": rows}


def print_for_the_note(shown: dict) -> None:
    print(json.dumps(shown, indent=1, default=str)[:20000])
