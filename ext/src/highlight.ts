/**
 * CodeMirror 6 highlighting of `%%stream` cells.
 *
 * A view plugin marks the tokens of `language.tokenize` with `cm-sc-<kind>` classes
 * (cm-sc-magic, cm-sc-stage, cm-sc-string, cm-sc-number, ...) and adds the class
 * `sc-stream-editor` to the editor, in any editor whose text starts with `%%stream`.
 * The marks are added on top of the editor's own (IPython) highlighting; the colours
 * live in ext/style/base.css.
 */

import { RangeSetBuilder } from '@codemirror/state';
import {
  Decoration,
  DecorationSet,
  EditorView,
  ViewPlugin,
  ViewUpdate
} from '@codemirror/view';

import { isStreamCell, tokenize, TokenKind } from './language';

/** Texts longer than this are highlighted up to this length only. */
export const MAX_HIGHLIGHT_CHARS = 100_000;

export const EDITOR_CLASS = 'sc-stream-editor';

const marks = new Map<TokenKind, Decoration>();
function mark(kind: TokenKind): Decoration {
  let m = marks.get(kind);
  if (!m) {
    m = Decoration.mark({ class: `cm-sc-${kind}` });
    marks.set(kind, m);
  }
  return m;
}

/** The decorations for a document's text (empty unless it is a `%%stream` cell). */
export function streamDecorations(text: string): DecorationSet {
  const builder = new RangeSetBuilder<Decoration>();
  for (const token of tokenize(text.slice(0, MAX_HIGHLIGHT_CHARS))) {
    if (token.to > token.from) {
      builder.add(token.from, token.to, mark(token.kind));
    }
  }
  return builder.finish();
}

function head(view: EditorView): string {
  return view.state.sliceDoc(0, Math.min(view.state.doc.length, 16));
}

/** The CodeMirror extension: highlight `%%stream` cells. */
export function streamHighlighting() {
  const plugin = ViewPlugin.fromClass(
    class {
      decorations: DecorationSet;
      isStream: boolean;
      constructor(view: EditorView) {
        this.isStream = isStreamCell(head(view));
        this.decorations = this.compute(view);
      }
      update(update: ViewUpdate): void {
        if (update.docChanged) {
          this.isStream = isStreamCell(head(update.view));
          this.decorations = this.compute(update.view);
        }
      }
      compute(view: EditorView): DecorationSet {
        if (!this.isStream) {
          return Decoration.none;
        }
        const doc = view.state.doc;
        return streamDecorations(
          view.state.sliceDoc(0, Math.min(doc.length, MAX_HIGHLIGHT_CHARS))
        );
      }
    },
    {
      decorations: p => p.decorations,
      // CodeMirror owns the editor's class attribute: add ours through the facet
      provide: p =>
        EditorView.editorAttributes.of(view =>
          view.plugin(p)?.isStream ? { class: EDITOR_CLASS } : null
        )
    }
  );
  return plugin;
}
