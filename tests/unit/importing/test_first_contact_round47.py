"""Classes of import failure found by reading held-out posts 529-536 first (round 47): a `docker run --network NAME`
of a network the poster made kept, so a node's Docker would not start the container (529, imported wrong at exit
0); copies of one launch that differ only by a logging variable offered as setups to pick from (535); a
container's `command:` list of flags lifted out of its file called no serving command (530); a Makefile target's
recipe pasted without its variables read as shell (`$$` the PID, `$(NAME)` a command substitution: 531)."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal


def test_a_network_of_the_poster_s_own_is_dropped_and_the_port_published() -> None:
    post = "docker run --rm --network bmk-net --gpus all vllm/vllm-openai:v0.33.0 --model org/m --port 8888\n"
    outcome = _import(post)
    words = outcome.recipe.docker.words()
    assert "--network" not in words and "8888:8888" in words
    assert any("--network bmk-net dropped: a network of the poster's own" in note for note in outcome.notes)


def test_docker_s_own_networks_are_kept() -> None:
    post = "docker run --network host --gpus all vllm/vllm-openai:v0.33.0 --model org/m --port 8888\n"
    assert "--network host" in " ".join(_import(post).recipe.docker.words())


def test_copies_that_differ_only_in_a_logging_variable_are_one_setup() -> None:
    launch = "vllm serve org/m --port 8000 --tensor-parallel-size 8\n"
    outcome = _import(f"{launch}\nNCCL_DEBUG=INFO {launch}")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "8"
    assert any("but for NCCL_DEBUG, a logging setting; taken once" in note for note in outcome.notes)


def test_a_container_s_argument_list_alone_is_named() -> None:
    post = 'The service:\n\n```yaml\n    command: ["--model", "/models/m", "--port", "80"]\n```\n'
    assert "`command:` holds a container's server flags without its image" in _refusal(post, "post.md")


def test_a_makefile_target_without_its_variables_names_the_unset_image() -> None:
    post = "run:\n\ttoken=`cat t`; \\\n\tdocker run -e HF_TOKEN=$$token -p $(PORT):8000 \\\n\t\t$(CONTAINER) --model $(MODEL)\n"
    assert "${CONTAINER} is a variable the post does not set" in _refusal(post, "post.md")


def test_the_one_launch_hgxkit_serves_beside_another_engine_s_is_taken() -> None:
    post = "llama-server -m model.gguf --port 8080\n\nvllm serve org/m --port 8000 --tensor-parallel-size 2\n"
    outcome = _import(post)
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"


def test_an_unfenced_post_with_a_command_has_no_root_prompts() -> None:
    post = "# vllm server\n# vllm serve org/m --port 8000\n\nset -x\npython3 -m trainer \\\n    a=1\n"
    assert "stands inside a comment" in _refusal(post)


def test_an_aiter_backend_is_amd_rocm() -> None:
    post = "python3 -m sglang.launch_server --model-path /root/m --tp 8 --attention-backend aiter\n"
    assert "AMD ROCm" in _refusal(post)
