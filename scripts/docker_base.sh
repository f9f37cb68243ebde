#!/usr/bin/env bash
# A local base image for the Dockerfile where no image registry can be reached: a Debian
# bookworm root file system (Python 3.11 and pip, from Debian's package mirror) imported
# into podman as localhost/abc-lightning-base:bookworm. Needs root, debootstrap and podman.
#   bash scripts/docker_base.sh
#   podman build --build-arg BASE=localhost/abc-lightning-base:bookworm -t abc_lightning .
set -euo pipefail
image=${1:-localhost/abc-lightning-base:bookworm}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
    bookworm "$root" http://deb.debian.org/debian
# as in the official python images: `python` is Python 3.11, and pip may install into it
ln -sf python3 "$root/usr/bin/python"
# this machine's certificate authorities (a proxy of its own may sign the package index's)
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | podman import --change 'CMD ["python"]' - "$image"
echo "made $image"
