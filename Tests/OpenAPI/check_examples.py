"""Checks OpenAPI/openapi.yaml's examples (run by scripts/test): every answer of every operation
has an example (or examples) for each of its media types, and every example is valid against
its schema (JSON Schema 2020-12, as OpenAPI 3.1 says; references resolved in the document).
Exits 1 naming each failure."""
import sys

import jsonschema
import yaml

SPEC = sys.argv[1] if len(sys.argv) > 1 else "OpenAPI/openapi.yaml"
doc = yaml.safe_load(open(SPEC, encoding="utf-8"))
# The whole document is the root, so "#/components/..." references resolve against it.
root = jsonschema.Draft202012Validator(doc, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def resolve(node):
    """Follows a local `$ref` (components/responses, components/examples)."""
    while isinstance(node, dict) and "$ref" in node:
        target = doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


failures = []
checked = 0
for path, item in doc["paths"].items():
    for method, operation in item.items():
        if method not in ("get", "post", "put", "patch", "delete"):
            continue
        for status, response in operation.get("responses", {}).items():
            response = resolve(response)
            for media_type, media in (response.get("content") or {}).items():
                where = f"{method.upper()} {path} {status} {media_type}"
                values = []
                if "example" in media:
                    values.append(("example", media["example"]))
                for name, example in (media.get("examples") or {}).items():
                    values.append((name, resolve(example).get("value")))
                if not values:
                    failures.append(f"{where}: no example")
                    continue
                schema = media.get("schema")
                if schema is None:
                    continue
                validator = root.evolve(schema=schema)
                for name, value in values:
                    checked += 1
                    for error in validator.iter_errors(value):
                        failures.append(f"{where} ({name}): {error.message} at {list(error.absolute_path)}")

for failure in failures:
    print("openapi example:", failure)
print(f"openapi examples: {checked} checked, {len(failures)} failing")
sys.exit(1 if failures else 0)
