"""The example reward functions, called as TRL and GRPO Service call them."""

from grpo_example_rewards import contains_answer, polite


def test_contains_answer_scores_per_completion_and_skips_records_without_answer():
    scores = contains_answer(
        prompts=["1+1=", "1+1=", "?"],
        completions=["it is 2", "3", "anything"],
        answer=["2", "2", ""],
        extra_field=[1, 1, 2],
    )
    assert scores == [1.0, 0.0, None]


def test_polite_ignores_case_and_extra_fields():
    assert polite(prompts=["p", "p"], completions=["Thanks!", "no"], answer=["", ""]) == [1.0, 0.0]


def test_conversational_completions_are_read_as_trl_hands_them_over():
    completions = [
        [{"role": "assistant", "content": "it is 2"}],
        [{"role": "assistant", "content": "3"}],
    ]
    prompts = [[{"role": "user", "content": "1+1="}]] * 2
    assert contains_answer(prompts=prompts, completions=completions, answer=["2", "2"]) == [
        1.0,
        0.0,
    ]
