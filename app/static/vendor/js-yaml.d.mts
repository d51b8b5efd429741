// Types for the parts of the vendored js-yaml.mjs the dashboard uses, so tsc (checkJs) reads
// this instead of type-checking the vendored file.

export declare function load(text: string, options?: object): unknown;
export declare function dump(value: unknown, options?: object): string;

export declare const EVENT_ID: {
  readonly DOCUMENT: 1;
  readonly SEQUENCE: 2;
  readonly MAPPING: 3;
  readonly SCALAR: 4;
  readonly ALIAS: 5;
  readonly POP: 6;
};

/**
 * One parser event, flattened: `start` is set on sequences and mappings, `valueStart` on
 * scalars, `anchorStart` on all three and aliases; documents and pops carry only their type.
 */
export interface ParserEvent {
  type: (typeof EVENT_ID)[keyof typeof EVENT_ID];
  start: number;
  anchorStart: number;
  valueStart?: number;
  valueEnd?: number;
}

export declare function parseEvents(text: string, options: object): Iterable<ParserEvent>;
