# shellcheck shell=bash
# Certificates, kubeconfigs and the control plane: etcd, kube-apiserver, controller-manager, scheduler.
# Sourced by test/lab/lab.sh, which defines the settings and helpers used here.

# ---------------------------------------------------------------- certificates
cert() { # NAME SUBJECT [SAN]; signed by $S/pki/$CERT_CA.crt (default ca)
  local k=$S/pki/$1 ca=$S/pki/${CERT_CA:-ca}
  local ext="basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth"
  [ -n "${3:-}" ] && ext="$ext\nsubjectAltName=$3"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$k.key" -subj "$2" 2>/dev/null |
    openssl x509 -req -CA "$ca.crt" -CAkey "$ca.key" -set_serial "0x$(openssl rand -hex 8)" -days 30 \
      -extfile <(printf "$ext") -out "$k.crt" 2>/dev/null
  [ -s "$k.crt" ] || die "could not make certificate $1"
}

kubeconfig() { # FILE CERTNAME
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tflab
  cluster: {server: "$APISERVER", certificate-authority: "$S/pki/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$S/pki/$2.crt", client-key: "$S/pki/$2.key"}
contexts:
- name: tflab
  context: {cluster: tflab, user: $2}
current-context: tflab
EOF
}

ca() { # NAME CN
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=$2" \
    -keyout "$S/pki/$1.key" -out "$S/pki/$1.crt" 2>/dev/null
}

pki() {
  mkdir -p "$S/pki"
  ca ca tflab-ca
  # The mode's own (may start jobs in the background: the wait below is theirs too).
  mode_hook pki
  cert apiserver /CN=kube-apiserver \
    "IP:$HOST_IP,IP:127.0.0.1,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:localhost" &
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" &
  cert admin "/O=system:masters/CN=tflab-admin" &
  cert controller-manager /CN=system:kube-controller-manager &
  cert scheduler /CN=system:kube-scheduler &
  local i
  for i in $(seq 1 "$NODES"); do cert "$(node_name "$i")" "/O=system:nodes/CN=system:node:$(node_name "$i")" & done
  openssl ecparam -name prime256v1 -genkey -noout -out "$S/pki/sa.key" 2>/dev/null
  openssl ec -in "$S/pki/sa.key" -pubout -out "$S/pki/sa.pub" 2>/dev/null
  wait
  local f
  for f in "$S"/pki/*.key; do [ -s "${f%.key}.crt" ] || [ "${f##*/}" = sa.key ] || die "certificate for $f missing"; done
  kubeconfig "$S/kubeconfig" admin
  kubeconfig "$S/controller-manager.kubeconfig" controller-manager
  kubeconfig "$S/scheduler.kubeconfig" scheduler
  for i in $(seq 1 "$NODES"); do kubeconfig "$S/nodes/$(node_name "$i")/kubelet.kubeconfig" "$(node_name "$i")"; done
}

# ---------------------------------------------------------------- control plane
control_plane() {
  start etcd - etcd --name tflab --data-dir "$S/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster tflab=http://127.0.0.1:12380 \
    --experimental-watch-progress-notify-interval=250ms
  apiserver
}

# apiserver: start kube-apiserver (also how `lab.sh restart kube-apiserver`
# starts it again, with the same flags).
apiserver() {
  local extra=()
  mapfile -t extra < <(mode_hook apiserver_flags)
  start kube-apiserver - "$K8S_BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address="$HOST_IP" --advertise-address="$HOST_IP" --secure-port=6443 \
    --tls-cert-file="$S/pki/apiserver.crt" --tls-private-key-file="$S/pki/apiserver.key" \
    --client-ca-file="$S/pki/ca.crt" \
    --kubelet-client-certificate="$S/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$S/pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-key-file="$S/pki/sa.pub" --service-account-signing-key-file="$S/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-cluster-ip-range="$SVC_RANGE" \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --enable-priority-and-fairness=false --profiling=false "${extra[@]}"
}

controllers() {
  start kube-controller-manager - "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$S/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$S/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$S/controller-manager.kubeconfig" \
    --service-account-private-key-file="$S/pki/sa.key" --root-ca-file="$S/pki/ca.crt" \
    --use-service-account-credentials=true --cluster-name=tflab --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0 --profiling=false
  start kube-scheduler - "$K8S_BIN/kube-scheduler" \
    --kubeconfig="$S/scheduler.kubeconfig" \
    --authentication-kubeconfig="$S/scheduler.kubeconfig" \
    --authorization-kubeconfig="$S/scheduler.kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port=0 --profiling=false
}
