/**
 * Completion in `%%stream` cells: stage keywords at the start of a line, the header's
 * options after `%%stream NAME`, and the language's functions inside expressions.
 * The kernel's own completions still come from JupyterLab's kernel provider.
 */

import {
  CompletionHandler,
  ICompletionContext,
  ICompletionProvider
} from '@jupyterlab/completer';

import {
  FUNCTIONS,
  HEADER_OPTIONS,
  STAGES,
  STAGE_DOCS,
  completionSpot
} from './language';

/** The items for `text` with the cursor at `offset` (pure, for the tests). */
export function streamCompletions(
  text: string,
  offset: number
): CompletionHandler.ICompletionItemsReply {
  const spot = completionSpot(text, offset);
  if (!spot) {
    return { start: offset, end: offset, items: [] };
  }
  const match = (label: string) => label.startsWith(spot.prefix);
  let items: CompletionHandler.ICompletionItem[];
  switch (spot.kind) {
    case 'stage':
      items = STAGES.filter(match).map(label => ({
        label,
        insertText: `${label} `,
        type: 'keyword',
        documentation: STAGE_DOCS[label]
      }));
      break;
    case 'option':
      items = HEADER_OPTIONS.filter(match).map(label => ({
        label,
        type: 'option'
      }));
      break;
    case 'function':
      items = FUNCTIONS.filter(match).map(label => ({
        label,
        type: 'function'
      }));
      break;
  }
  return { start: spot.start, end: offset, items };
}

export class StreamCompletionProvider implements ICompletionProvider {
  readonly identifier = 'streamcell:stream-cell';
  readonly rank = 600;
  readonly renderer = null;

  async isApplicable(context: ICompletionContext): Promise<boolean> {
    return !!context.editor;
  }

  async fetch(
    request: CompletionHandler.IRequest,
    context: ICompletionContext
  ): Promise<CompletionHandler.ICompletionItemsReply> {
    return streamCompletions(request.text, request.offset);
  }
}
