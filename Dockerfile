# Container image for the Helm chart: `docker build -t ghcr.io/sloguard/sloguard:0.1.0 .`
# The chart runs it as `sloguard run -c /etc/sloguard/sloguard.yaml` (args), non-root, read-only root FS.
# torch is not installed: the GPU canary needs `pip install .[canary]` in a derived image (CUDA wheels, ~3 GB).
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sloguard ./sloguard
RUN pip install --no-cache-dir . && rm -rf /src
USER 65532:65532
EXPOSE 9478
ENTRYPOINT ["sloguard"]
CMD ["run", "-c", "/etc/sloguard/sloguard.yaml"]
