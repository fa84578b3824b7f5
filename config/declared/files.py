"""The Files API: where uploaded files are kept, and how much of them."""

from __future__ import annotations

from config.declared.spec import SECRET_ENV, WEB, WORKER, Derived, Setting

TITLE = "Files"

FILES = (WEB, WORKER)

SETTINGS = (
    Setting(
        "SWITCHYARD_FILES_STORAGE",
        "str",
        "local",
        "Where uploaded files are kept: `local` (a folder, `SWITCHYARD_FILES_DIR`) or `s3` "
        "(an S3-compatible bucket, `SWITCHYARD_FILES_S3_*`). Either way their content is "
        "encrypted with the organisation's key before it is written.",
        FILES,
        choices=("local", "s3"),
        case="lower",
    ),
    Setting(
        "SWITCHYARD_FILES_DIR",
        "str",
        Derived("the folder `data/files` in the project folder"),
        "The folder of uploaded files with `SWITCHYARD_FILES_STORAGE=local`.",
        FILES,
    ),
    Setting(
        "SWITCHYARD_FILES_S3_BUCKET",
        "str",
        "",
        "The bucket of uploaded files with `SWITCHYARD_FILES_STORAGE=s3`.",
        FILES,
    ),
    Setting(
        "SWITCHYARD_FILES_S3_ENDPOINT_URL",
        "str",
        "",
        "The S3 endpoint (MinIO, Ceph, another cloud's); empty: AWS's.",
        FILES,
    ),
    Setting(
        "SWITCHYARD_FILES_S3_REGION",
        "str",
        "",
        "The bucket's region; empty: the client's default.",
        FILES,
    ),
    Setting(
        "SWITCHYARD_FILES_S3_ACCESS_KEY_ID",
        "str",
        "",
        "The S3 access key id; empty: boto3's own chain (instance role, environment).",
        FILES,
        secret=True,
        placement=SECRET_ENV,
    ),
    Setting(
        "SWITCHYARD_FILES_S3_SECRET_ACCESS_KEY",
        "str",
        "",
        "The S3 secret access key, with `SWITCHYARD_FILES_S3_ACCESS_KEY_ID`.",
        FILES,
        secret=True,
        placement=SECRET_ENV,
    ),
    Setting(
        "SWITCHYARD_FILES_MAX_BYTES",
        "int",
        64 * 1024 * 1024,
        "The largest file one upload may hold, in bytes; a larger upload is refused (413) "
        "while it is read, never buffered whole.",
        FILES,
    ),
    Setting(
        "SWITCHYARD_FILES_QUOTA_BYTES",
        "int",
        1024 * 1024 * 1024,
        "The bytes of files an organisation may keep in all, unless its own file quota "
        "(console, management API, `apply -f`) says otherwise.",
        FILES,
    ),
    Setting(
        "SWITCHYARD_FILES_UPLOAD_TIMEOUT_SECONDS",
        "float",
        300.0,
        "Seconds an upload's body may take to arrive; a slower one is refused (408).",
        FILES,
    ),
)
