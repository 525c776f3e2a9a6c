{{/*
The prefix of every object's name: fullnameOverride, else the release name when it contains the
chart's name, else "<release>-<chart>". Release "trainer" gives config/'s names.
*/}}
{{- define "trainer.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "trainer.operatorName" -}}
{{- if .Values.operatorName -}}
{{- .Values.operatorName | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "trainer.fullname" . }}-operator
{{- end -}}
{{- end -}}

{{- define "trainer.leaderElectionName" -}}
{{- include "trainer.fullname" . }}-leader-election
{{- end -}}

{{- define "trainer.webhookCertificatesName" -}}
{{- include "trainer.fullname" . }}-webhook-certificates
{{- end -}}

{{- define "trainer.metricsServiceName" -}}
{{- include "trainer.fullname" . }}-operator-metrics
{{- end -}}

{{- define "trainer.webhookServiceName" -}}
{{- include "trainer.fullname" . }}-webhook-service
{{- end -}}

{{/* Labels of every object. */}}
{{- define "trainer.labels" -}}
app.kubernetes.io/name: trainer
app.kubernetes.io/part-of: trainer
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The operator pods' labels, which the Deployment and both Services select. */}}
{{- define "trainer.selectorLabels" -}}
app.kubernetes.io/name: trainer
app.kubernetes.io/component: operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The ClusterRole's rules: config/rbac/role.yaml (generated from trainer/render/rbac.py) plus the rules
config/overlays/<gangScheduler>/role_patch.yaml adds, both kept verbatim under files/config/.
*/}}
{{- define "trainer.clusterRoleRules" -}}
{{- $role := .Files.Get "files/config/rbac/role.yaml" | fromYaml -}}
{{- if or (not $role) (hasKey $role "Error") -}}
{{- fail "files/config/rbac/role.yaml is missing or not YAML: run `make chart`" -}}
{{- end -}}
{{- $rules := $role.rules -}}
{{- with .Files.Get (printf "files/config/overlays/%s/role_patch.yaml" .Values.gangScheduler) -}}
{{- range $op := fromYamlArray . -}}
{{- if not (and (eq $op.op "add") (eq $op.path "/rules/-")) -}}
{{- fail (printf "role_patch.yaml of %s: only `add /rules/-` is understood, not %v" $.Values.gangScheduler $op) -}}
{{- end -}}
{{- $rules = append $rules $op.value -}}
{{- end -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}
