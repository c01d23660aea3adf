{{/*
Names, labels and small derived values shared by the templates.
*/}}

{{- define "nodewright.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-based name; "nodewright" for a release called nodewright. */}}
{{- define "nodewright.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "nodewright.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Namespace of every namespaced object. helm uses "default" when -n is not given; the controller
belongs in kube-system on EKS (the IRSA trust names system:serviceaccount:kube-system:<sa>),
so "default" maps to kube-system. namespaceOverride wins over both.
*/}}
{{- define "nodewright.namespace" -}}
{{- if .Values.namespaceOverride -}}
{{- .Values.namespaceOverride -}}
{{- else if eq .Release.Namespace "default" -}}
kube-system
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "nodewright.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodewright.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nodewright.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "nodewright.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nodewright
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "nodewright.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "nodewright.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Karpenter chart keys and nodewright's aliases. Karpenter's key carries the default; an alias (our older
spelling, default empty) wins when set. The image is the other way round: Karpenter's
controller.image.* (default empty) wins over our image.* when set.
*/}}
{{- define "nodewright.imageRepository" -}}
{{- default .Values.image.repository .Values.controller.image.repository -}}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest pins the image (the tag is then ignored). */}}
{{- define "nodewright.image" -}}
{{- $digest := default .Values.image.digest .Values.controller.image.digest -}}
{{- if $digest -}}
{{- printf "%s@%s" (include "nodewright.imageRepository" .) $digest -}}
{{- else -}}
{{- printf "%s:%s" (include "nodewright.imageRepository" .) (default .Chart.AppVersion (default .Values.image.tag .Values.controller.image.tag)) -}}
{{- end -}}
{{- end -}}

{{- define "nodewright.pullPolicy" -}}
{{- default .Values.imagePullPolicy .Values.image.pullPolicy -}}
{{- end -}}

{{- define "nodewright.metricsPort" -}}
{{- default .Values.controller.metrics.port .Values.controller.metricsPort -}}
{{- end -}}

{{- define "nodewright.healthProbePort" -}}
{{- default .Values.controller.healthProbe.port .Values.controller.healthProbePort -}}
{{- end -}}

{{- define "nodewright.logLevel" -}}
{{- default .Values.logLevel .Values.settings.logLevel -}}
{{- end -}}

{{/* Karpenter's additionalAnnotations, on every object of the controller (metadata.annotations). */}}
{{- define "nodewright.annotations" -}}
{{- with .Values.additionalAnnotations -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/*
A copy of a pod (anti-)affinity or spread-constraint term with labelSelector defaulted to the controller's
selector labels when the term gives none (Karpenter's chart does the same).
Call with (dict "term" $term "root" $).
*/}}
{{- define "nodewright.withSelector" -}}
{{- $term := deepCopy .term -}}
{{- if not (hasKey $term "labelSelector") -}}
{{- $_ := set $term "labelSelector" (dict "matchLabels" (include "nodewright.selectorLabels" .root | fromYaml)) -}}
{{- end -}}
{{- toYaml $term -}}
{{- end -}}

{{/*
affinity with Karpenter's meaning (labelSelector defaulted in pod (anti-)affinity terms), plus one rule
nodewright always keeps: the controller never runs on a node it manages (karpenter.sh/nodepool DoesNotExist
in every required node selector term), or it could consolidate its own node away.
*/}}
{{- define "nodewright.affinity" -}}
{{- $affinity := deepCopy (default dict .Values.affinity) -}}
{{- $guard := dict "key" "karpenter.sh/nodepool" "operator" "DoesNotExist" -}}
{{- $node := default dict $affinity.nodeAffinity -}}
{{- $required := default dict (get $node "requiredDuringSchedulingIgnoredDuringExecution") -}}
{{- $terms := list -}}
{{- range $term := default list $required.nodeSelectorTerms -}}
{{- $expressions := default list $term.matchExpressions -}}
{{- if not (has $guard $expressions) -}}
{{- $expressions = append $expressions $guard -}}
{{- end -}}
{{- $terms = append $terms (merge (dict "matchExpressions" $expressions) $term) -}}
{{- end -}}
{{- if not $terms -}}
{{- $terms = list (dict "matchExpressions" (list $guard)) -}}
{{- end -}}
{{- $_ := set $required "nodeSelectorTerms" $terms -}}
{{- $_ = set $node "requiredDuringSchedulingIgnoredDuringExecution" $required -}}
{{- $_ = set $affinity "nodeAffinity" $node -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- with get $affinity $kind -}}
{{- $pod := . -}}
{{- $req := list -}}
{{- range $term := default list (get $pod "requiredDuringSchedulingIgnoredDuringExecution") -}}
{{- $req = append $req (include "nodewright.withSelector" (dict "term" $term "root" $) | fromYaml) -}}
{{- end -}}
{{- if $req -}}
{{- $_ := set $pod "requiredDuringSchedulingIgnoredDuringExecution" $req -}}
{{- end -}}
{{- $pref := list -}}
{{- range $weighted := default list (get $pod "preferredDuringSchedulingIgnoredDuringExecution") -}}
{{- $term := include "nodewright.withSelector" (dict "term" $weighted.podAffinityTerm "root" $) | fromYaml -}}
{{- $pref = append $pref (dict "weight" $weighted.weight "podAffinityTerm" $term) -}}
{{- end -}}
{{- if $pref -}}
{{- $_ := set $pod "preferredDuringSchedulingIgnoredDuringExecution" $pref -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/*
FEATURE_GATES in Karpenter's syntax: "Gate=true,Other=false", gates sorted by name.
settings.featureGates is either that string already or a map of camelCase gate -> bool.
*/}}
{{- define "nodewright.featureGates" -}}
{{- $gates := .Values.settings.featureGates -}}
{{- if kindIs "string" $gates -}}
{{- $gates -}}
{{- else -}}
{{- $parts := list -}}
{{- range $key := keys $gates | sortAlpha -}}
{{- $gate := printf "%s%s" (upper (substr 0 1 $key)) (substr 1 -1 $key) -}}
{{- $parts = append $parts (printf "%s=%t" $gate (index $gates $key)) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}
{{- end -}}

{{/* Discovery selector term used when a node class lists no selector terms of its own. */}}
{{- define "nodewright.discoveryTerms" -}}
- tags:
    karpenter.sh/discovery: {{ .Values.settings.clusterName | quote }}
{{- end -}}

{{/*
The NodePools and EC2NodeClasses need the cluster (discovery tags, node role), so they render only
once settings.clusterName is set; an unconfigured render still lints and shows the controller.
*/}}
{{- define "nodewright.renderPools" -}}
{{- if .Values.settings.clusterName -}}true{{- end -}}
{{- end -}}

{{/* Node IAM role name: nodeRole, else the stacks' convention "<clusterName>-nodewright-node". */}}
{{- define "nodewright.nodeRole" -}}
{{- default (printf "%s-nodewright-node" .Values.settings.clusterName) .Values.nodeRole -}}
{{- end -}}

{{/* A pool is on unless it says `enabled: false` (a pool added without the key is on). */}}
{{- define "nodewright.poolEnabled" -}}
{{- if or (not (hasKey . "enabled")) .enabled -}}true{{- end -}}
{{- end -}}
