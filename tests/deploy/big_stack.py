"""`make sam-check`, at MediaWiki's scale: 120 job types on 120 queues.

Writes the declaration and runs `jobkit template` on it into DIR (the root
template and its nested stacks' templates), then transforms each template as
`sam deploy` would (nested stacks packaged first) and runs cfn-lint on each,
and checks each against CloudFormation's limits. Exits 1 on any finding.

    python tests/deploy/big_stack.py DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TYPES = 120
LIMITS = {"Resources": 500, "Outputs": 200, "Parameters": 200}
CHILD_PARAMETERS = {
    "Prefix": "jobkit",
    "LayerArn": "arn:aws:lambda:us-east-1:123456789012:layer:jobkit:1",
    "JobsTableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/jobkit-jobs",
}


def main(directory: Path) -> int:
    from cfnlint.api import ManualArgs, lint

    from jobkit.local.cloudformation import load_template, translate

    directory.mkdir(parents=True, exist_ok=True)
    lines = ["[jobkit]", 'prefix = "big"', ""]
    for n in range(TYPES):
        pushed = f"jobType{(n + 1) % TYPES:03d}"
        lines += [f"[types.jobType{n:03d}]", 'class = "jobs.big:BigJob"', f'pushes = ["{pushed}"]', ""]
    (directory / "jobs.toml").write_text("\n".join(lines))
    jobkit = str(Path(sys.executable).parent / "jobkit")
    subprocess.run(
        [jobkit, "template", "--config", str(directory / "jobs.toml"), "--output", str(directory / "template.yaml")],
        check=True,
    )
    findings = 0
    for path in [directory / "template.yaml", *sorted(directory.glob("template.queues-*.yaml"))]:
        template = load_template(path)
        for resource in template["Resources"].values():
            if resource["Type"] == "AWS::Serverless::Application":  # as `sam package` leaves it
                location = resource["Properties"]["Location"]
                resource["Properties"]["Location"] = f"https://s3.amazonaws.com/artifacts/{location}"
        parameters = {"Prefix": "jobkit"} if path.name == "template.yaml" else CHILD_PARAMETERS
        translated = translate(template, parameters=parameters)
        for section, limit in LIMITS.items():
            if len(translated.get(section, {})) > limit:
                print(f"{path.name}: {len(translated[section])} {section}, over CloudFormation's {limit}")
                findings += 1
        if len(path.read_bytes()) > 1_000_000:
            print(f"{path.name}: over 1 MB")
            findings += 1
        matches = [str(m) for m in lint(json.dumps(translated), config=ManualArgs(regions=["us-east-1"]))]
        for match in matches:
            print(f"{path.name}: {match}")
        findings += len(matches)
        if not matches:
            print(f"{path.name}: {len(translated['Resources'])} resources once transformed, lint-clean")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
