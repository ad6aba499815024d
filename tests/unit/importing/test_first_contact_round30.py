"""Classes of import failure found by reading held-out posts 393-400 first (round 30): a launch typed into an
interactive container after `pip install`s in it imported at exit 0 on the bare image, its `--ulimit`s dropped
(395); a format string's field with slashes (`{trained/model/path}`) taken for a local path (394)."""

from __future__ import annotations

from test_first_contact_round5 import _import, _refusal

SHELL = (
    "docker run --rm -it --ulimit memlock=-1 --shm-size 16g -e A=1 {extra}--gpus=all vllm/vllm-openai:v0.10.1.1 bash\n"
)
LAUNCH = "vllm serve org/m --tensor-parallel-size 4\n"


def test_an_install_inside_the_launch_s_container_is_refused_by_name() -> None:
    message = _refusal(SHELL.format(extra="") + "pip install flash-attn\n" + LAUNCH)
    assert "the post installs software into the container started at post.sh:1" in message
    assert "`pip install flash-attn` (post.sh:2)" in message and "--image REF" in message


def test_with_an_image_given_the_install_is_a_note() -> None:
    outcome = _import(SHELL.format(extra="") + "pip install flash-attn\n" + LAUNCH, image="acme/vllm:glm")
    assert outcome.recipe.image.reference == "acme/vllm:glm"
    assert any("is taken to hold what the post installs (`pip install flash-attn`" in n for n in outcome.notes)


def test_the_container_s_limits_and_environment_are_carried_and_its_other_options_named() -> None:
    outcome = _import(SHELL.format(extra="-v /:/work --privileged ") + LAUNCH)
    words = outcome.recipe.docker.words()
    assert "--ulimit" in words and "memlock=-1" in words and "16g" in " ".join(words)
    assert "A=1" in " ".join(words)
    assert "/:/work" not in " ".join(words) and "--privileged" not in words
    assert any("also has -v /:/work, --privileged; not carried" in n for n in outcome.notes)


def test_a_command_that_only_reads_installed_packages_is_no_install() -> None:
    outcome = _import(SHELL.format(extra="") + "pip list\n" + LAUNCH)
    assert outcome.recipe.image.reference == "vllm/vllm-openai:v0.10.1.1"


def test_a_format_field_with_slashes_is_a_placeholder() -> None:
    message = _refusal("python3 -m sglang.launch_server --model-path {trained/model/path} --tp 2\n")
    assert "{trained/model/path} is a placeholder" in message


FRAGMENT = """My services:
```
  vllm-a:
    image: vllm/vllm-openai:v0.33.0
    ipc: host
    command: ["--model", "org/m", "--tensor-parallel-size", "2"]
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, count: all, capabilities: [gpu]}]
```
"""


def test_compose_services_pasted_without_their_services_key_are_read() -> None:
    outcome = _import(FRAGMENT, "post.md")
    assert outcome.recipe.server.flag("--tensor-parallel-size") == "2"
    assert any("with no `services:` key above them" in note for note in outcome.notes)


def test_a_mapping_of_images_with_no_compose_key_is_not_taken_for_services() -> None:
    post = "```\nsettings:\n  image: vllm/vllm-openai:v0.33.0\n  replicas: 2\n```\nvllm serve org/m\n"
    outcome = _import(post, "post.md")
    assert not any("with no `services:` key above them" in note for note in outcome.notes)


def test_a_makefile_s_variables_are_read_as_the_shell_s() -> None:
    post = (
        "REPO := acme/sglang\nVERSION := v1\n\nbuild:\n\tdocker build -t $(REPO):$(VERSION) .\n\n"
        "run:\n\tdocker run --gpus all $(REPO):$(VERSION) \\\n\tpython3 -m sglang.launch_server --model-path org/m\n"
    )
    message = _refusal(post, "Makefile")
    assert "the image acme/sglang:v1 is built by `docker build` (Makefile:5)" in message


def test_a_makefile_s_image_it_does_not_build_is_imported_with_a_note() -> None:
    post = "IMAGE ?= lmsysorg/sglang:v0.5.4\n\nrun:\n\tdocker run --gpus all $(IMAGE) python3 -m sglang.launch_server --model-path org/m\n"
    outcome = _import(post, "Makefile")
    assert outcome.recipe.image.reference == "lmsysorg/sglang:v0.5.4"
    assert any(note.endswith("its targets' recipes as shell lines") for note in outcome.notes)


def test_a_supervisord_program_s_command_is_the_launch() -> None:
    post = (
        '[program:llm]\ncommand=vllm serve org/m --limit-mm-per-prompt "{\\"images\\": 4}"\n'
        'environment=A="1",B="2"\nautostart=true\nstdout_logfile=/tmp/x.log\n'
    )
    outcome = _import(post, "llm.conf")
    assert outcome.recipe.server.flag("--limit-mm-per-prompt") == '{"images": 4}'
    assert {"A=1", "B=2"} <= set(outcome.recipe.docker.words())
    assert any("a supervisord program: read as" in note for note in outcome.notes)


def test_mini_sglang_is_named() -> None:
    assert "Mini-SGLang (mini-sglang) is not supported" in _refusal("python -m minisgl --model org/m --tp 4\n")


def test_a_unit_s_environment_after_its_command_still_reaches_the_server() -> None:
    post = "[Unit]\nDescription=llm\n[Service]\nExecStart=/opt/v/bin/vllm serve org/m\nEnvironment=A=1\n"
    assert "A=1" in _import(post, "llm.service").recipe.docker.words()


def test_a_stray_word_after_the_last_flag_is_refused_where_the_model_flag_names_the_model() -> None:
    message = _refusal("vllm serve /srv/m --port 43383 启动的时候报错\n", image="vllm/vllm-openai:v0.33.0")
    assert "`启动的时候报错` after `43383` is a positional argument" in message


def test_cmd_exe_carets_are_continuations_and_a_python_check_container_is_no_server() -> None:
    post = (
        '```\ndocker run --rm --gpus all vllm/vllm-openai:latest python3 -c "import torch"\n```\n\n```\n'
        "docker run --gpus all -p 8000:8000 ^\n  vllm/vllm-openai:v0.33.0 ^\n  --model org/m ^\n  --port 8000\n```\n"
    )
    outcome = _import(post, "post.md")
    assert outcome.recipe.server.flag("--port") == "8000"
    assert any("cmd.exe's line continuation" in note for note in outcome.notes)
    assert any("a one-off command in the image" in r.what for r in outcome.report)


def test_a_comment_in_backticks_inside_a_command_is_nothing() -> None:
    post = "python3 -m sglang.launch_server --model-path org/m \\\n  `# ===== part two =====` \\\n  --tp 2\n"
    outcome = _import(post)
    assert outcome.recipe.server.flag("--tp") == "2"
    assert any("read as nothing (a comment in backticks" in note for note in outcome.notes)


def test_sglang_jax_is_named() -> None:
    assert "sgl_jax is SGLang-JAX" in _refusal("python -m sgl_jax.launch_server --model-path org/m --tp-size 4\n")
