# Container image for the Helm chart (no public image exists): build and push it yourself, e.g.
#   docker build -t registry.example.com/sloguard:0.1.0 . && docker push registry.example.com/sloguard:0.1.0
# UNTESTED: no Docker engine was available where sloguard is developed; CI only checks that the files the
# build needs are copied (tests/unit/deploy/test_dockerfile.py).
# The chart runs it as `sloguard run -c /etc/sloguard/sloguard.yaml` (args), non-root, read-only root FS.
# torch is not installed: the GPU canary needs `pip install .[canary]` in a derived image (CUDA wheels, ~3 GB).
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY sloguard ./sloguard
RUN pip install --no-cache-dir . && rm -rf /src
USER 65532:65532
EXPOSE 9478
ENTRYPOINT ["sloguard"]
CMD ["run", "-c", "/etc/sloguard/sloguard.yaml"]
