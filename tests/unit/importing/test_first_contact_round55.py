"""Classes of import failure found by reading held-out posts 590-605 first (rounds 55 and 56): GitOps resources whose
controller renders the server's pods from a source the post does not hold (Flux's HelmRelease, Argo CD's
Application: 'no serving command found', 591-595), a kustomize overlay whose patch was read as a workload of its own
('no image', 590, 596, 597), files pasted as `head` prints them (`==> path <==`) read as one YAML mapping, and a mount
of root's whole `.cache` kept for a placed model (599)."""

from __future__ import annotations

from test_first_contact_round5 import _refusal

HELM_RELEASE = """apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: vllm
spec:
  chart:
    spec:
      chart: vllm-stack
  values:
    servingEngineSpec:
      modelSpec:
        - name: m
          repository: vllm/vllm-openai
          tag: v0.8.0
          requestGPU: 1
"""


def test_a_flux_helm_release_names_its_chart_and_how_to_render_it() -> None:
    message = _refusal(HELM_RELEASE, "release.yaml")
    assert message.startswith("release.yaml:1: HelmRelease vllm: Flux installs the Helm chart vllm-stack")
    assert "helm template vllm vllm-stack -f values.yaml" in message


def test_another_accelerator_in_a_helm_release_is_named_first() -> None:
    post = HELM_RELEASE.replace("          requestGPU: 1\n", "          resources:\n            amd.com/gpu: 1\n")
    assert "amd.com/gpu is AMD ROCm" in _refusal(post, "release.yaml")


def test_an_argo_cd_application_names_its_source() -> None:
    post = (
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: vllm-granite\nspec:\n"
        "  source:\n    repoURL: https://github.com/x/y\n    path: helm/vllm\n    helm:\n      parameters:\n"
        "        - name: model\n          value: ibm-granite/granite-3.3-8b-instruct\n"
    )
    assert "Application vllm-granite: Argo CD renders its source helm/vllm" in _refusal(post, "app.yaml")


OVERLAY = """# ==> overlay/kustomization.yaml <==
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../base
images:
  - name: replaced-by-kustomize
    newName: vllm/vllm-openai
    newTag: v0.33.0
# ==> base/deployment.yaml <==
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: replaced-by-kustomize
          args: ["--model", "org/m"]
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def test_a_kustomize_overlay_pasted_with_its_base_is_named_with_kubectl_kustomize() -> None:
    message = _refusal(OVERLAY, "post.yaml")
    assert message.startswith("post.yaml:2: a kustomize overlay (its images:)")
    assert "render them (kubectl kustomize DIR)" in message


def test_a_kustomization_that_only_lists_resources_changes_nothing() -> None:
    post = OVERLAY.replace(
        "images:\n  - name: replaced-by-kustomize\n    newName: vllm/vllm-openai\n    newTag: v0.33.0\n", ""
    )
    post = post.replace("image: replaced-by-kustomize", "image: vllm/vllm-openai:v0.33.0")
    from test_first_contact_round5 import _import

    assert _import(post, "post.yaml").recipe.image.reference == "vllm/vllm-openai:v0.33.0"


def test_servers_hgxkit_does_not_deploy_are_set_aside_beside_a_choice_of_those_it_does() -> None:
    post = (
        "vllm serve org/m --port 8000\n\nollama serve\n\nvllm serve org/e --port 8001\n\n"
        "llama-server -m m.gguf --port 8002\n"
    )
    message = _refusal(post)
    assert "import one with --pick N (1: line 1, 3: line 5)" in message
    assert message.endswith("set aside, as hgxkit does not deploy it: Ollama (line 3), llama.cpp server (line 7)")


def test_a_variable_the_container_s_script_sets_is_no_template_variable() -> None:
    post = OVERLAY.split("# ==> base/deployment.yaml <==\n")[1].replace(
        '          args: ["--model", "org/m"]\n',
        '          command: ["/bin/bash", "-c"]\n          args:\n            - |\n'
        "              MY_IP=$(hostname -i)\n              vllm serve org/m --host ${MY_IP}\n",
    )
    message = _refusal(post.replace("replaced-by-kustomize", "vllm/vllm-openai:v0.33.0"), "post.yaml")
    assert "runs a script, not one server command: it runs `MY_IP=$(hostname -i)` besides the launch" in message
