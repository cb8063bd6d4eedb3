//! Mention matching against known names: separators, full-width `＠`, longest match, and unknown names.

use super::*;

fn seed() -> KnownNames {
    KnownNames::new([
        "delegate",
        "委托处理",
        "business",
        "业务助理",
        "creative",
        "创意伙伴",
        "talker",
        "创意总监",
        "socrates",
        "苏格拉底",
        "exp_master",
        "经验大师",
    ])
}

/// `(mention, strip_mention)` of `text` under the seed's names.
fn read(text: &str) -> (Option<String>, String) {
    let names = seed();
    (
        names.mention(text).map(str::to_string),
        names.strip_mention(text),
    )
}

fn check(text: &str, name: Option<&str>, rest: &str) {
    assert_eq!(
        read(text),
        (name.map(str::to_string), rest.to_string()),
        "{text:?}"
    );
}

#[test]
fn a_chinese_name_needs_no_separator() {
    check(
        "@创意伙伴帮我想两个漫画创意",
        Some("创意伙伴"),
        "帮我想两个漫画创意",
    );
    check("@创意总监你选哪个？", Some("创意总监"), "你选哪个？");
}

#[test]
fn every_separator_people_type_is_stripped_once() {
    for text in [
        "@创意伙伴 帮我想",
        "@创意伙伴\u{3000}帮我想",
        "@创意伙伴:帮我想",
        "@创意伙伴：帮我想",
        "@创意伙伴,帮我想",
        "@创意伙伴，帮我想",
        "@创意伙伴 ： 帮我想",
        "  @创意伙伴帮我想",
    ] {
        check(text, Some("创意伙伴"), "帮我想");
    }
    // Only one separator mark: a second one is the message's own.
    check("@creative: :) hi", Some("creative"), ":) hi");
}

#[test]
fn a_full_width_at_sign_mentions_too() {
    check("＠创意伙伴帮我想", Some("创意伙伴"), "帮我想");
    check(
        "＠business，how were sales?",
        Some("business"),
        "how were sales?",
    );
}

#[test]
fn the_longest_known_name_wins() {
    let names = KnownNames::new(["创意", "创意伙伴", "ab", "abc"]);
    assert_eq!(names.mention("@创意伙伴写"), Some("创意伙伴"));
    assert_eq!(names.strip_mention("@创意伙伴写"), "写");
    assert_eq!(names.mention("@创意写"), Some("创意"));
    assert_eq!(names.mention("@abc d"), Some("abc"));
    assert_eq!(names.mention("@ab d"), Some("ab"));
}

#[test]
fn latin_names_ignore_case_and_do_not_match_inside_a_word() {
    check("@Business: how?", Some("business"), "how?");
    check("@businessman hi", None, "@businessman hi");
    check("@exp_master2 hi", None, "@exp_master2 hi");
    check("@creative帮我", Some("creative"), "帮我");
}

#[test]
fn an_unknown_or_misplaced_name_is_no_mention_and_the_text_stays_whole() {
    check("@nobody 你好", None, "@nobody 你好");
    check("@创意 帮我", None, "@创意 帮我");
    check("hello @creative", None, "hello @creative");
    check("@ creative", None, "@ creative");
    check("@", None, "@");
    check("", None, "");
    assert_eq!(KnownNames::default().mention("@creative hi"), None);
}

#[test]
fn a_mention_alone_leaves_an_empty_message() {
    check("@创意伙伴", Some("创意伙伴"), "");
    check("@creative ", Some("creative"), "");
}
