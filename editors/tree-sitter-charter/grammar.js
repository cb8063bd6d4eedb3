/**
 * @file The tree-sitter grammar of Charter specs (`.charter`), DESIGN §2.2.
 * @license Apache-2.0
 *
 * It follows `compiler/src/syntax/grammar.pest`: the same items, properties and
 * expressions, with one word token (`identifier`) for every kind of name; what a name is
 * (a contract, an issue code, an enum variant) comes from where it stands, as in the
 * compiler. Keywords are contextual: a keyword is a keyword only where the grammar expects
 * it, so `failed` is a step target after `->` and an enum variant in `status != failed`.
 */

/* eslint-disable arrow-parens */
/* eslint-disable camelcase */
/* eslint-disable-next-line spaced-comment */
/// <reference types="tree-sitter-cli/dsl" />
// @ts-check

const PREC = {
  quantifier: 0,
  or: 1,
  and: 2,
  not: 3,
  compare: 4,
  add: 5,
  multiply: 6,
  unary: 7,
};

const commaSep1 = (rule) => seq(rule, repeat(seq(',', rule)), optional(','));
const commaSep = (rule) => optional(commaSep1(rule));
/** Entries of a `{ ... }` block, each optionally followed by a comma. */
const entries = (rule) => repeat(seq(rule, optional(',')));

module.exports = grammar({
  name: 'charter',

  word: ($) => $.identifier,

  extras: ($) => [/\s/, $.comment],

  supertypes: ($) => [$._item, $._expression],

  // `input: A, B, model: m`: a comma after a role's input types either adds a type or ends
  // the property; the word after it decides.
  conflicts: ($) => [[$.property]],

  rules: {
    source_file: ($) => seq($.header, repeat($._item)),

    header: ($) =>
      seq('spec', field('name', $.identifier), 'version', field('version', $._string),
        optional(field('doc', $.block_string))),

    _item: ($) =>
      choice(
        $.import,
        $.models,
        $.rules,
        $.contract,
        $.tool,
        $.mcp,
        $.role,
        $.gate,
        $.repair,
        $.invariant,
        $.budget,
        $.session,
        $.remember,
        $.flow,
      ),

    // --- items -------------------------------------------------------------------------

    import: ($) =>
      seq('import', 'role', field('path', $._string),
        optional(seq('{', entries($.permit), '}'))),

    models: ($) => seq('models', '{', entries($.model), '}'),
    model: ($) =>
      seq(field('name', $.identifier), '=', field('target', $._string), optional($.price),
        repeat($.model_parameter)),
    price: ($) => seq('price', $.number, '/', $.number),
    model_parameter: ($) =>
      choice(
        seq(choice('temperature', 'top_p', 'max_tokens', 'seed'), $.number),
        seq('idle_timeout', $.duration),
        seq('output', choice('json_schema', 'json_object', 'prompt')),
      ),

    rules: ($) =>
      seq('rules', field('name', $.identifier), optional(seq('version', $._string)),
        '{', entries($._string), '}'),

    contract: ($) => seq('contract', field('name', $.type_identifier), $.field_list),
    session: ($) =>
      seq('session', field('name', $.type_identifier), 'keep', $.number, $.field_list),
    field_list: ($) => seq('{', entries($.field), '}'),
    field: ($) =>
      seq(field('name', $.identifier), ':', field('type', $.type),
        optional(seq('=', field('default', $._expression)))),

    remember: ($) => seq('remember', field('name', $.identifier), '=', $._expression),

    tool: ($) => seq('tool', field('name', $.identifier), '{', entries($.property), '}'),
    role: ($) => seq('role', field('name', $.identifier), '{', entries($.property), '}'),

    /** `mcp NAME { ... }`: an MCP server and the tools a spec may use from it (DESIGN §19). */
    mcp: ($) => seq('mcp', field('name', $.identifier), '{', entries($.mcp_entry), '}'),
    mcp_entry: ($) =>
      choice(
        seq(field('key', 'command'), ':', field('value', $.string_list)),
        seq(field('key', 'url'), ':', field('value', $.string)),
        seq(field('key', choice('headers', 'env')), ':', field('value', $.secret_map)),
        seq(field('key', 'tools'), ':', field('value', choice($.name_list, $.all_tools))),
        seq(field('key', 'timeout'), ':', field('value', $.duration)),
        seq(field('key', 'retry'), ':', field('value', $.number),
          optional(seq('backoff', $.duration))),
        seq(field('key', 'sandbox'), choice(field('value', $.sandbox), seq(':', 'required'))),
      ),
    string_list: ($) => seq('[', commaSep($.string), ']'),
    /** `tools: *`: every tool the server lists. */
    all_tools: (_) => '*',
    /** `headers: { ... }` or `env: { ... }`: names (a header's may hold `-`) to values. */
    secret_map: ($) => seq('{', entries($.secret_entry), '}'),
    secret_entry: ($) =>
      seq(field('name', $.secret_name), ':', field('value', choice($.string, $.env_call))),
    secret_name: (_) => /[A-Za-z_][A-Za-z0-9_-]*/,
    /** `env("VAR")`: a variable of Charter's environment, read when the value is used. */
    env_call: ($) => seq('env', '(', $.string, ')'),
    /** `SERVER.TOOL`: a tool of an `mcp` server, where a role names a tool. */
    mcp_tool: ($) =>
      seq(field('server', $.identifier), token.immediate('.'), field('tool', $.identifier)),
    _tool_name: ($) => choice($.identifier, $.mcp_tool),
    tool_list: ($) => seq('[', commaSep($._tool_name), ']'),

    /** A property of a role or a tool. */
    property: ($) =>
      choice(
        seq(field('key', 'model'), ':', field('value', choice($.identifier, $._string))),
        seq(field('key', 'prompt'), ':', field('value', choice($.prompt_file, $._string))),
        seq(field('key', choice('rules', 'history')), ':', field('value', $.name_list),
          optional(seq('last', $.number))),
        seq(field('key', 'tools'), ':', field('value', $.tool_list)),
        seq(field('key', 'input'), ':', commaSep1(field('value', $.type_identifier))),
        seq(field('key', 'output'), ':', field('value', $.type_identifier)),
        seq(field('key', 'effect'), ':', field('value', $.effect)),
        seq(field('key', 'max_tool_calls'), ':', field('value', $.number)),
        seq(field('key', 'timeout'), ':', field('value', $.duration)),
        seq(field('key', 'retry'), ':', field('value', $.number),
          optional(seq('backoff', $.duration))),
        seq(field('key', 'tool_choice'), ':', field('value', $._tool_name)),
        seq(field('key', 'retry_after_effects'), ':', field('value', $.boolean)),
        seq(field('key', 'messages'), ':', field('value', $.identifier)),
        seq(field('key', 'sandbox'), choice(field('value', $.sandbox), seq(':', 'required'))),
        $.permit,
      ),
    permit: ($) => seq('permit', field('tool', $._tool_name), 'when', $._expression),
    prompt_file: ($) => seq('file', '(', $._string, ')'),
    effect: (_) => choice('read', 'write', 'external'),
    /** The `sandbox { ... }` of a tool or an `mcp` server: what its processes may reach. */
    sandbox: ($) => seq('{', entries($.sandbox_entry), '}'),
    sandbox_entry: ($) =>
      choice(
        seq(field('key', choice('read', 'write')), ':', field('value', $.path_list)),
        seq(field('key', 'network'), ':', field('value', $.network)),
        seq(field('key', 'env'), ':', field('value', $.env_list)),
        seq(field('key', 'processes'), ':', field('value', $.number)),
        seq(field('key', 'required'), ':', field('value', $.boolean)),
      ),
    path_list: ($) => seq('[', commaSep($.string), ']'),
    env_list: ($) => seq('[', commaSep(alias($.identifier, $.env_name)), ']'),
    network: (_) => choice('none', 'loopback', 'any'),
    name_list: ($) => seq('[', commaSep($.identifier), ']'),

    gate: ($) =>
      seq('gate', field('name', $.identifier), 'on', field('subject', $.identifier), '{',
        repeat(choice($.check_rule, $.score_rule)), $.pass_when, '}'),
    check_rule: ($) =>
      seq(choice('hard', 'warn'), field('name', $.identifier), ':', $._expression,
        'else', $.code, optional($.detail)),
    score_rule: ($) =>
      seq('score', field('name', $.identifier), 'weight', $.number, ':', $._expression,
        optional(seq('below', $.number, $.code, optional($.detail)))),
    detail: ($) => seq('detail', $._expression),
    pass_when: ($) => seq('pass', 'when', $._expression),

    repair: ($) =>
      seq('repair', '{', 'rounds', $.number, optional(seq('no_progress', $.number)),
        repeat($.repair_arm), '}'),
    repair_arm: ($) =>
      seq(choice(alias('_', $.wildcard), commaSep1($.code)), '->', $.action),
    action: ($) =>
      choice(
        seq('rerun', field('step', $.identifier), optional(seq('with', 'feedback'))),
        'replan',
        'accept',
        seq(choice('block', 'fail', 'ask'), $._string),
      ),

    invariant: ($) =>
      seq('invariant', field('name', $.identifier), ':',
        choice(
          seq('only', field('role', $.identifier), 'uses', field('tool', $._tool_name)),
          seq('always', $._expression),
          seq(field('role', $.identifier), 'has', 'no', 'tools'),
        )),

    budget: ($) =>
      seq('budget', '{',
        entries(choice(
          seq(choice('tokens', 'cost', 'steps'), $.number),
          seq('wall', $.duration),
          seq('on_exhausted', field('step', $.identifier)),
        )),
        '}'),

    // --- flow --------------------------------------------------------------------------

    flow: ($) => seq('flow', '{', repeat($.step), '}'),
    step: ($) =>
      seq(field('name', $.identifier), '=', field('body', $._step_body),
        choice($.goto, seq(repeat1($.when_arm), optional($.else_arm)), $.pass_fail),
        optional($.on_error)),
    _step_body: ($) =>
      choice($.call, $.each, $.gate_call, $.finalize, $.ask, $.branch, $.tool_call),
    call: ($) => seq(field('role', $.identifier), $.arguments),
    each: ($) =>
      seq('each', field('item', $.identifier), 'in', $._expression, ':',
        field('role', $.identifier), $.arguments,
        optional(seq('concurrency', $.number)),
        optional(seq('check', field('gate', $.identifier),
          optional(seq('by', field('judge', $.identifier))),
          optional(seq('retries', $.number))))),
    gate_call: ($) => seq('gate', field('gate', $.identifier)),
    finalize: ($) => seq('finalize', field('role', $.identifier), $.arguments),
    ask: ($) => seq('ask', $._string, optional(seq('max', $.number))),
    branch: (_) => 'branch',
    tool_call: ($) => seq('tool', field('tool', $.identifier), $.arguments),
    arguments: ($) => seq('(', commaSep($._expression), ')'),

    goto: ($) => seq('->', $._target),
    when_arm: ($) => seq('when', $._expression, '->', $._target),
    else_arm: ($) => seq('else', '->', $._target),
    on_error: ($) => seq('on_error', '->', field('step', $.identifier)),
    pass_fail: ($) =>
      seq('pass', '->', $._target, 'fail', '->', choice(alias('repair', $.repair_target), $._target)),
    _target: ($) => choice($.terminal, field('step', $.identifier)),
    terminal: ($) => choice('done', seq(choice('blocked', 'failed'), $._string)),

    // --- types -------------------------------------------------------------------------

    type: ($) =>
      seq(choice($.primitive_type, $.list_type, $.type_identifier, $.enum_type),
        optional('?')),
    primitive_type: ($) =>
      choice('string', 'bool', seq(choice('int', 'float'), optional($.range))),
    list_type: ($) => seq('list', '<', $.type, '>', optional($.range)),
    enum_type: ($) =>
      seq(alias($.identifier, $.variant), repeat1(seq('|', alias($.identifier, $.variant)))),
    range: ($) =>
      seq('(', optional(field('min', $.signed_number)), choice('..', '..='),
        optional(field('max', $.signed_number)), ')'),
    signed_number: ($) => seq(optional('-'), $.number),

    // --- expressions -------------------------------------------------------------------

    _expression: ($) =>
      choice(
        $.binary_expression,
        $.unary_expression,
        $.quantifier,
        $.call_expression,
        $.path,
        $.identifier,
        $.number,
        $.string,
        $.block_string,
        $.parenthesized_expression,
        $.list,
        $.record,
        $.boolean,
        $.none,
      ),
    binary_expression: ($) =>
      choice(
        ...[
          ['or', PREC.or],
          ['and', PREC.and],
          [choice('==', '!=', '<', '<=', '>', '>='), PREC.compare],
          [choice('+', '-'), PREC.add],
          [choice('*', '/'), PREC.multiply],
        ].map(([operator, precedence]) =>
          prec.left(precedence, seq(field('left', $._expression),
            field('operator', operator), field('right', $._expression)))),
      ),
    unary_expression: ($) =>
      choice(
        prec(PREC.not, seq(field('operator', 'not'), $._expression)),
        prec(PREC.unary, seq(field('operator', '-'), $._expression)),
      ),
    quantifier: ($) =>
      prec.right(PREC.quantifier,
        seq(choice('every', 'some', 'count'), field('variable', $.identifier), 'in',
          field('collection', $._expression), ':', field('condition', $._expression))),
    call_expression: ($) => seq(field('function', $.identifier), $.arguments),
    path: ($) =>
      seq($.identifier, repeat1(seq('.', alias($.identifier, $.field_identifier)))),
    parenthesized_expression: ($) => seq('(', $._expression, ')'),
    list: ($) => seq('[', commaSep($._expression), ']'),
    record: ($) => seq('{', commaSep($.record_field), '}'),
    record_field: ($) => seq(field('name', $.identifier), ':', $._expression),
    boolean: (_) => choice('true', 'false'),
    none: (_) => 'none',

    // --- lexical -----------------------------------------------------------------------

    identifier: (_) => /[A-Za-z_][A-Za-z0-9_]*/,
    type_identifier: ($) => alias($.identifier, 'type_identifier'),
    code: ($) => alias($.identifier, 'code'),
    number: (_) => /\d[\d_]*(\.\d+)?([eE][+-]?\d+)?/,
    duration: (_) => /\d[\d_]*(\.\d+)?[A-Za-z_][A-Za-z0-9_]*/,

    _string: ($) => choice($.string, $.block_string),
    string: ($) =>
      seq('"', repeat(choice($.string_content, $.escape_sequence)), token.immediate('"')),
    string_content: (_) => token.immediate(prec(1, /[^"\\\n]+/)),
    escape_sequence: (_) => token.immediate(/\\./),
    block_string: ($) =>
      seq('"""', optional(alias($._block_content, $.string_content)), token.immediate('"""')),
    _block_content: (_) => token.immediate(prec(1, /([^"]|"[^"]|""[^"])+/)),

    comment: (_) =>
      token(choice(seq('//', /[^\n]*/), seq('/*', /[^*]*\*+([^/*][^*]*\*+)*/, '/'))),
  },
});
