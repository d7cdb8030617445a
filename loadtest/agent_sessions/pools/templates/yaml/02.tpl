apiVersion: apps/v1
kind: Deployment
metadata:
  name: «kb1»
  labels: &labels
    app.kubernetes.io/name: «kb1»
    app.kubernetes.io/version: "«x1».«x2».«x3»"
spec:
  replicas: «x4»
  selector:
    matchLabels: *labels
  template:
    metadata:
      labels: *labels
      annotations:
        checksum/config: «h1»
    spec:
      containers:
        - name: server
          image: ghcr.io/«user»/«kb1»:sha-«h2»
          args: ["--port=8080", "--max-batch=«x5»"]
          resources:
            limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: 1}

