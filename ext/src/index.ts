/**
 * streamcell's JupyterLab plugins:
 * - `streamcell:plugin`: the Streams side panel, the status bar item, the commands;
 * - `streamcell:highlight`: CodeMirror highlighting of `%%stream` cells;
 * - `streamcell:completer`: completion in `%%stream` cells.
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import {
  EditorExtensionRegistry,
  IEditorExtensionRegistry
} from '@jupyterlab/codemirror';
import { ICompletionProviderManager } from '@jupyterlab/completer';
import {
  INotebookTracker,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';

import { StreamCompletionProvider } from './completer';
import { KernelConnector } from './connection';
import { streamHighlighting } from './highlight';
import { DEFAULT_INTERVAL_MS, StreamsModel } from './model';
import { StreamsPanel } from './panel';
import { StreamsStatus } from './statusbar';

const PLUGIN_ID = 'streamcell:plugin';

export namespace CommandIDs {
  export const openPanel = 'streamcell:open-streams-panel';
  export const refresh = 'streamcell:refresh-streams';
}

export const streamsIcon = new LabIcon({
  name: 'streamcell:streams',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<path class="jp-icon3" fill="#616161" d="M2 6c3 0 3 2 6 2s3-2 6-2 3 2 6 2h2v2h-2c-3 0-3-2-6-2s-3 2-6 2-3-2-6-2H2V6zm0 5c3 0 3 2 6 2s3-2 6-2 3 2 6 2h2v2h-2c-3 0-3-2-6-2s-3 2-6 2-3-2-6-2H2v-2zm0 5c3 0 3 2 6 2s3-2 6-2 3 2 6 2h2v2h-2c-3 0-3-2-6-2s-3 2-6 2-3-2-6-2H2v-2z"/>' +
    '</svg>'
});

/** Settings of `streamcell:plugin` (ext/schema/plugin.json). */
interface ISettings {
  refreshRateMs: number;
  openPanelAutomatically: boolean;
}

function readSettings(settings: ISettingRegistry.ISettings | null): ISettings {
  const composite = (settings?.composite ?? {}) as Partial<ISettings>;
  return {
    refreshRateMs:
      typeof composite.refreshRateMs === 'number'
        ? composite.refreshRateMs
        : DEFAULT_INTERVAL_MS,
    openPanelAutomatically: composite.openPanelAutomatically !== false
  };
}

/** Show the cell with model id `cellId` in `panel`; false if it is not there. */
function goToCell(
  app: JupyterFrontEnd,
  panel: NotebookPanel | null,
  cellId: string
): boolean {
  if (!panel) {
    return false;
  }
  const notebook = panel.content;
  const index = notebook.widgets.findIndex(cell => cell.model.id === cellId);
  if (index < 0) {
    return false;
  }
  app.shell.activateById(panel.id);
  notebook.activeCellIndex = index;
  void notebook.scrollToItem(index, 'center');
  return true;
}

const streamsPlugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'The Streams panel and status item of streamcell.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry, IStatusBar, ICommandPalette, ILayoutRestorer],
  activate: async (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    settingRegistry: ISettingRegistry | null,
    statusBar: IStatusBar | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const model = new StreamsModel();
    const connector = new KernelConnector(model);
    const panel = new StreamsPanel({
      model,
      onGoToCell: cellId => {
        if (!goToCell(app, tracker.currentWidget, cellId)) {
          console.info(`streamcell: cell ${cellId} is not in this notebook`);
        }
      }
    });
    panel.title.icon = streamsIcon;
    app.shell.add(panel, 'right', { rank: 650 });
    restorer?.add(panel, 'streamcell-streams-panel');

    let settings = readSettings(null);
    if (settingRegistry) {
      try {
        const loaded = await settingRegistry.load(PLUGIN_ID);
        const apply = () => {
          settings = readSettings(loaded);
          model.setInterval(settings.refreshRateMs);
        };
        apply();
        loaded.changed.connect(apply);
      } catch (reason) {
        console.warn('streamcell: cannot load the settings', reason);
      }
    }

    const follow = (widget: NotebookPanel | null) => {
      connector.setSession(
        widget?.sessionContext ?? null,
        widget?.context.localPath ?? ''
      );
    };
    tracker.currentChanged.connect((_, widget) => follow(widget));
    follow(tracker.currentWidget);

    // streamcell may have been loaded by the cell that just ran: try the comm again
    NotebookActions.executed.connect((_, { notebook }) => {
      if (notebook === tracker.currentWidget?.content) {
        connector.retry();
      }
    });

    model.runStarted.connect(() => {
      if (settings.openPanelAutomatically && !panel.isVisible) {
        app.shell.activateById(panel.id);
      }
    });

    app.commands.addCommand(CommandIDs.openPanel, {
      label: 'Show Streams Panel',
      caption: 'The streamcell runs of the current notebook',
      execute: () => app.shell.activateById(panel.id)
    });
    app.commands.addCommand(CommandIDs.refresh, {
      label: 'Refresh Streams',
      isEnabled: () => model.state === 'connected',
      execute: () => model.refresh()
    });
    palette?.addItem({ command: CommandIDs.openPanel, category: 'Streamcell' });
    palette?.addItem({ command: CommandIDs.refresh, category: 'Streamcell' });

    if (statusBar) {
      const item = new StreamsStatus(model, () => {
        void app.commands.execute(CommandIDs.openPanel);
      });
      statusBar.registerStatusItem('streamcell:status', {
        item,
        align: 'left',
        rank: 50,
        isActive: () => item.isActive,
        activeStateChanged: model.changed
      });
    }
  }
};

const highlightPlugin: JupyterFrontEndPlugin<void> = {
  id: 'streamcell:highlight',
  description: 'Highlighting of %%stream cells.',
  autoStart: true,
  requires: [IEditorExtensionRegistry],
  activate: (app: JupyterFrontEnd, registry: IEditorExtensionRegistry) => {
    registry.addExtension({
      name: 'streamcell:stream-cell-highlighting',
      factory: () =>
        EditorExtensionRegistry.createImmutableExtension(streamHighlighting())
    });
  }
};

const completerPlugin: JupyterFrontEndPlugin<void> = {
  id: 'streamcell:completer',
  description: 'Completion of stages, options and functions in %%stream cells.',
  autoStart: true,
  requires: [ICompletionProviderManager],
  activate: (app: JupyterFrontEnd, manager: ICompletionProviderManager) => {
    manager.registerProvider(new StreamCompletionProvider());
  }
};

export default [streamsPlugin, highlightPlugin, completerPlugin];
