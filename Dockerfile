# syntax=docker/dockerfile:1
# Serving image: nettel without TensorFlow. `--target training` adds the training extras.
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
COPY models ./models
COPY training ./training
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11.11-slim-bookworm AS serve
RUN useradd --create-home --uid 10001 nettel
COPY --from=build /install /usr/local
USER nettel
WORKDIR /home/nettel
ENV NETTEL_LISTEN=0.0.0.0:8080
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz').status != 200)"]
ENTRYPOINT ["nettel"]
CMD ["serve"]

FROM serve AS training
USER root
COPY --from=build /src /src
RUN pip install --no-cache-dir "/src[training]"
USER nettel
ENTRYPOINT ["nettel"]
CMD ["train"]
